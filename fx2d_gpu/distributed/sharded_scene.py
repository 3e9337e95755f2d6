"""ShardedScene: one scene's worlds split over Ray actors, answered with global world indices.

Worlds never interact, so a scene of n_worlds is cut into contiguous ranges, one Scene per Ray
actor (worker.ShardWorker). The driver holds what it needs to answer without a round trip and
to check every argument before any shard sees it (the model, the per-world values, the forces
pending for the next step); the shards hold the state.

Round trips: calls that change the scene (forces, targets, values, resets, set_state) are
checked here, queued, and travel with the next call that needs an answer (a step or a
query), so that an agent's loop costs one round trip per step and one per observation.

Losing a shard: the driver keeps each shard's last snapshot and every batch of changes sent
since (the log). An actor whose process dies is restarted by Ray (max_restarts) from the same
source; the driver restores the snapshot and replays the log, and the run goes on bit for bit
as if nothing had happened (on_worker_loss="recover"), or the call raises ShardLostError
naming the shard (on_worker_loss="raise"; recover() then rebuilds it).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..access.gather import QUANTITIES, columns_target
from ..access.readout import check_state_out, float_dtype
from ..access.snapshots import SceneSnapshot
from ..access.spatial_queries import body_indices, joint_indices
from ..access.world_resets import state_rows
from ..checks import as_bool_table, as_count, as_index, as_real, as_step_count, as_step_length
from ..model.builder import add_forces, check_forces, check_mode_targets, check_state, check_targets
from ..model.model_queries import ModelQueries
from ..model.world_params import BODY_PARAMS, WorldParams, world_selection
from ..model.world_shapes import SHAPE_PARAMS, WorldShapes, check_shape_change, per_world_arguments
from ..physics.solver.faults import SimulationError
from ..records import ContactEvents, State
from ..scene import Scene
from .worker import ShardWorker, Source

#: What a lost shard does to the call that found it lost.
ON_WORKER_LOSS = ("recover", "raise")
"""The values of ShardedScene's on_worker_loss: rebuild a lost shard and finish the call, or
raise ShardLostError."""

MAX_STEPS_PER_CALL = 100_000
"""The most steps one ShardedScene.step call takes (its `n`): a call cannot be stopped short
of Ctrl-C, which then leaves the scene refusing to step until restore(); a longer run is a
loop of calls (each a chance to stop, and to take the recovery snapshots)."""

FINISH_SECONDS = 20.0
"""The longest ShardedScene.close waits for its shards to write their compiled kernels into
Taichi's offline cache (ShardWorker.finish; about a second each here) before it kills them."""


class ShardLostError(RuntimeError):
    """A shard's actor died (on_worker_loss="raise", or recovery failed).

    The call that found it did its work on the other shards; ShardedScene.recover() rebuilds
    the lost shard from its last snapshot, replaying everything since (that call's changes
    included), after which the scene goes on as if nothing had happened.

    Args:
        message: what happened, naming the shard and its worlds.
        shard: the shard's index.
        worlds: its global worlds.

    Attributes:
        shard (int): the shard's index.
        worlds (range): its global worlds.
    """

    def __init__(self, message: str, shard: int, worlds: range):
        super().__init__(message)
        self.shard = shard
        self.worlds = worlds


def shard_ranges(n_worlds: int, n_shards: int) -> list[range]:
    """`n_worlds` worlds cut into `n_shards` contiguous ranges whose sizes differ by at most
    one, the larger first.

    Raises:
        TypeError: an argument that is not an int.
        ValueError: an argument below 1, or more shards than worlds.
    """
    n_worlds, n_shards = as_count(n_worlds, "n_worlds"), as_count(n_shards, "n_shards")
    if n_shards > n_worlds:
        raise ValueError(f"n_shards ({n_shards}) must not exceed n_worlds ({n_worlds})")
    base, extra = divmod(n_worlds, n_shards)
    bounds = np.cumsum([0] + [base + (i < extra) for i in range(n_shards)])
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@dataclasses.dataclass
class ShardedSnapshot:
    """Everything that affects a ShardedScene's future (ShardedScene.snapshot, restore).

    Attributes:
        shards: each shard's SceneSnapshot, in order.
        ranges: each shard's global worlds.
        params: the per-world values of every world (the driver's copy).
        shapes: the per-world shapes and placements of every world (the driver's copy;
            None in a snapshot pickled before they were sharded: restore reads the
            shards').
        forces: {body: (force (n_worlds, 2) N, torque (n_worlds,) N m)} given to apply_force
            for the next step.
        time: the scene's clock, s.
        step_count: the steps it had taken.
    """

    shards: list[SceneSnapshot]
    ranges: list[range]
    params: WorldParams
    forces: dict
    time: float
    step_count: int
    shapes: WorldShapes | None = None


@dataclasses.dataclass
class _Shard:
    """The driver's record of one shard: its actor, worlds, recovery snapshot and log."""

    actor: Any
    worlds: range
    snapshot: SceneSnapshot | None = None
    log: list = dataclasses.field(default_factory=list)  # batches run since the snapshot
    pending: list = dataclasses.field(default_factory=list)  # queued, not yet sent
    lost: bool = False
    pid: int = 0


class ShardedScene(ModelQueries):
    """A scene of `n_worlds` worlds simulated as contiguous shards, one Ray actor each.

    World w of a ShardedScene evolves bit for bit as world w of one Scene built the same way
    (worlds never interact, and a shard's scene is such a Scene of fewer worlds). The Scene
    calls that make sense across worlds work here with global world indices: step (several
    steps a round trip with `n`), get_state / set_state, apply_force, set_joint_target,
    set_joint_mode, set_body_params / set_gravity / set_joint_params, reset_worlds,
    set_enabled, contacts / contact_events, ray casts and overlap queries, joint readouts,
    snapshot / restore, and the model's questions (n_bodies, body_index, body_mass, ...),
    answered by the driver. A shard's scene runs wherever Ray places its actor, on the backend
    `arch` names there.

    Ray must be installed (the `distributed` extra); ray.init() is the caller's (else Ray
    starts a local cluster on the first actor).

    Args:
        n_worlds: the scene's worlds, >= n_shards.
        builder (Callable[[int], Scene] | None): a picklable function that builds a Scene of
            the number of worlds it is given (each shard calls it with its own count; every
            world must be built the same, as per-world initial conditions come from set_state
            or set_body_params on the ShardedScene).
        template (Scene | None): instead of builder: a one-world Scene whose model, settings,
            values and state each world copies (Scene.replicate).
        n_shards: how many actors, >= 1.
        shard_options (dict | None): Ray actor options for every shard: its resources
            ({"num_cpus": 1} by default; {"num_gpus": 1} gives each shard a GPU of its own),
            a scheduling strategy, a runtime_env...
        snapshot_every (int | None): steps between the snapshots a lost shard is rebuilt
            from (each taken in the same round trip as the step that reaches it); None: only
            the first, taken when the shards start (then the log of changes only grows).
        on_worker_loss: "recover" (rebuild a lost shard and finish the call as if nothing
            happened) or "raise" (ShardLostError naming the shard; recover() rebuilds it).
        max_restarts: how often Ray restarts each actor (-1: without limit); past it, a
            lost shard gets a new actor.
        timeout: seconds to wait for the shards' actors to start (TimeoutError: the
            cluster lacks the resources shard_options asks for n_shards times) or for a
            lost one to restart (ShardLostError).
        ray (module | None): the Ray the shards run on: None imports ray; else an object
            with the parts of ray's API the driver calls (remote, get, kill,
            exceptions), such as an in-process stand-in that runs each shard in this
            process.

    Attributes:
        on_worker_loss (str): "recover" or "raise".
        snapshot_every (int | None): steps between recovery snapshots.
        timeout (float): seconds to wait for an actor to start or restart.
        settings (dict): the shards' Scene() arguments but n_worlds (gravity, substeps,
            solver, friction_mixing, restitution_mixing, enable_sleep, on_fault, arch).
        backends (list[str]): each shard's Taichi backend ("x64", "cuda", "vulkan", ...).
        time (float): simulated time, s, as Scene.time.
        step_count (int): steps taken.

    Raises:
        TypeError: neither or both of builder and template, a builder that is not callable,
            or an argument of the wrong type.
        ValueError: a template of more than one world, n_shards above n_worlds, an unknown
            on_worker_loss, or a builder whose scenes' models differ between shards.
        ImportError: Ray is not installed.
    """

    def __init__(
        self,
        n_worlds: int,
        builder: Callable[[int], Scene] | None = None,
        *,
        template: Scene | None = None,
        n_shards: int = 2,
        shard_options: dict | None = None,
        snapshot_every: int | None = 100,
        on_worker_loss: str = "recover",
        max_restarts: int = -1,
        timeout: float = 300.0,
        ray=None,
    ):
        if ray is None:
            import ray

        self._ray = ray
        source = _check_source(builder, template)
        self._ranges = shard_ranges(n_worlds, n_shards)
        self._n_worlds = int(n_worlds)
        if on_worker_loss not in ON_WORKER_LOSS:
            raise ValueError(
                f"on_worker_loss must be one of {ON_WORKER_LOSS}, got {on_worker_loss!r}"
            )
        self.on_worker_loss = on_worker_loss
        self.snapshot_every = (
            None if snapshot_every is None else as_count(snapshot_every, "snapshot_every")
        )
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int):
            raise TypeError(f"max_restarts must be an int, got {type(max_restarts).__name__}")
        if max_restarts < -1:
            raise ValueError(f"max_restarts must be >= -1, got {max_restarts}")
        self.timeout = as_real(timeout, "timeout")
        if shard_options is not None and not isinstance(shard_options, dict):
            raise TypeError(
                f"shard_options must be a dict of Ray actor options, got "
                f"{type(shard_options).__name__}"
            )
        options = {"num_cpus": 1, **(shard_options or {})}
        self._actor_class = ray.remote(ShardWorker).options(
            max_restarts=max_restarts, max_task_retries=0, **options
        )
        self._source = source
        self._closed = False
        self._calls_waiting = 0  # calls waiting on the shards (close() finishes none then)
        self._shards = [_Shard(self._start_actor(worlds), worlds) for worlds in self._ranges]
        try:
            described = self._describe_started(options)
            first = described[0]
            # (The backend may differ: shards on nodes with and without a GPU.)
            same = {"n_worlds": 0, "arch": ""}
            for i, d in enumerate(described[1:], 1):
                if (
                    d["settings"] | same != first["settings"] | same
                    or len(d["builder"].bodies) != len(first["builder"].bodies)
                    or len(d["builder"].joints) != len(first["builder"].joints)
                ):
                    raise ValueError(
                        f"the builder made shard {i} a scene unlike shard 0's "
                        "(another model or settings)"
                    )
        except BaseException:
            # Unplaced actors or a builder that hangs would hold a finish for FINISH_SECONDS.
            self._close(finish=False)
            raise
        self._builder = first["builder"]
        self._params = WorldParams.stacked([d["params"] for d in described], self._builder)
        self._shapes = WorldShapes.stacked([d["shapes"] for d in described], self._builder)
        self.settings = {k: v for k, v in first["settings"].items() if k != "n_worlds"}
        self.backends = [d["backend"] for d in described]
        self.time, self.step_count = first["time"], first["step_count"]
        self._pending_forces: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._faulted_worlds = np.zeros(0, np.int64)
        # Why the scene refuses to step until restore() (a shard faulted, or a call was
        # interrupted), or None; _interrupted: the logs may not hold what the shards did.
        self._broken: str | None = None
        self._interrupted = False
        self._snapshot_step = self.step_count
        for shard, d in zip(self._shards, described, strict=True):
            shard.pid = d["pid"]
        self._gpu_ids = [d["gpu_ids"] for d in described]
        self._shard_env = [d["env"] for d in described]
        self._run_batches({i: ([], []) for i in range(len(self._shards))}, snapshot=True)

    # ------------------------------------------------------------------ the layout
    @property
    def n_worlds(self) -> int:
        """The number of worlds, over every shard."""
        return self._n_worlds

    @property
    def n_shards(self) -> int:
        """The number of shards (actors)."""
        return len(self._shards)

    @property
    def shard_worlds(self) -> list[range]:
        """Each shard's global worlds, contiguous and in order."""
        return list(self._ranges)

    @property
    def faulted_worlds(self) -> np.ndarray:
        """(k,) int64: the global worlds the last step found faulty (on_fault="reset")."""
        self._check_open()
        return self._faulted_worlds.copy()

    def shard_info(self) -> list[dict]:
        """Each shard's actor process and placement: {"worlds", "pid", "backend", "gpu_ids"
        (Ray's), "env" (the CUDA_VISIBLE_DEVICES and TI_VISIBLE_DEVICE it runs with)}."""
        self._check_open()
        return [
            {
                "worlds": s.worlds,
                "pid": s.pid,
                "backend": backend,
                "gpu_ids": gpus,
                "env": dict(env),
            }
            for s, backend, gpus, env in zip(
                self._shards, self.backends, self._gpu_ids, self._shard_env, strict=True
            )
        ]

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float, n: int = 1):
        """Advance every world by `n` steps of `dt` seconds, in one round trip per shard.

        Forces given to apply_force act over the first of the n steps (they are for the
        next step, as Scene's); joint targets hold for all of them.

        Args:
            dt: the step, s, as Scene.step takes it (>= 1e-3; above 0.06 clamped).
            n: steps, >= 1.

        Raises:
            TypeError, ValueError: dt or n as Scene.step and `n` would refuse them (n at most
                MAX_STEPS_PER_CALL).
            RuntimeError: the scene is closed (also by close() from another thread while
                this call waits), or refuses to step until restore() (a shard faulted, or
                an earlier call was interrupted).
            SimulationError: a shard's world faulted (on_fault="raise"), naming the shard and
                its global worlds. The shards then stand at different steps: restore a
                snapshot to go on.
            ShardLostError: a shard was lost (on_worker_loss="raise", or it could not be
                rebuilt).
        """
        self._check_open()
        dt = as_step_length(dt)
        n = as_step_count(n, "n", MAX_STEPS_PER_CALL)
        self._check_usable(changing=True)
        # Until the clock has counted the steps, the scene refuses to step: a KeyboardInterrupt
        # anywhere below leaves it so (see _run_batches for the shards' side).
        unfinished = f"step(dt, n={n}) was interrupted before the driver counted its steps"
        self._broken = unfinished
        forces, self._pending_forces = self._pending_forces, {}
        for shard in self._shards:
            rows = slice(shard.worlds.start, shard.worlds.stop)
            if forces:
                shard.pending.append(
                    (
                        "apply_forces",
                        ({body: (f[rows], t[rows]) for body, (f, t) in forces.items()},),
                        {},
                    )
                )
            shard.pending.append(("step_n", (dt, n), {}))
        snapshot = (
            self.snapshot_every is not None
            and self.step_count + n - self._snapshot_step >= self.snapshot_every
        )
        try:
            results = self._run_batches(
                {i: ([], []) for i in range(self.n_shards)}, snapshot=snapshot
            )
        except ShardLostError:
            if self._broken is unfinished:  # the other shards stepped; recover() replays it
                self._advance_clock(dt, n)
                self._broken = None
            raise
        except Exception as error:  # a shard refused or faulted: the others stepped
            if self._broken is unfinished:
                self._broken = f"a shard raised {type(error).__name__} in a step"
            raise
        self._advance_clock(dt, n)
        if snapshot:
            self._snapshot_step = self.step_count
        self._faulted_worlds = np.concatenate(
            [
                shard.worlds.start + np.asarray(results[i][-1], np.int64)
                for i, shard in enumerate(self._shards)
            ]
        )
        self._broken = None

    def _advance_clock(self, dt: float, n: int):
        """time and step_count after n steps of dt (s, as_step_length's), summed step by
        step as Scene's."""
        for _ in range(n):
            self.time += dt
        self.step_count += n

    # ------------------------------------------------------------------ changes (queued)
    def apply_force(self, body: int, force, torque=0.0):
        """Add a force at `body`'s centre of mass, and a torque, for the next step only
        (Scene.apply_force, with global worlds: force (2,) or (n_worlds, 2), torque a scalar
        or (n_worlds,)). Checked here; sent with the next step."""
        self._check_open()
        body = self._builder.check_body(body)
        f, t = check_forces(force, torque, self._n_worlds)
        self._pending_forces[body] = add_forces(self._pending_forces.get(body), f, t, body)

    def set_joint_target(self, joint: int, target):
        """Set `joint`'s motor target, a scalar for every world or (n_worlds,)
        (Scene.set_joint_target)."""
        self._check_open()
        joint = self._builder.check_joint(joint)
        values = check_targets(target, self._n_worlds, self._builder.joints[joint].mode)
        self._queue_rows(lambda rows: ("set_joint_target", (joint, values[rows]), {}))

    def set_joint_mode(self, joint: int, control_mode, pid=None, max_effort=None):
        """Change `joint`'s motor in every world (Scene.set_joint_mode): one round trip, to
        read every world's target first.

        Args:
            joint: a joint index.
            control_mode (str | None): None, "position", "velocity" or "effort".
            pid (tuple[float, float, float] | None): new (p, i, d) gains; None keeps them.
            max_effort (float | None): the new limit, N m or N, > 0; None keeps it.
        """
        self._check_open()
        joint = self._builder.check_joint(joint)
        targets = self._query_all(("_joint_targets", (joint,), {}))
        check_mode_targets(joint, control_mode, np.concatenate(targets))
        motor = self._builder.set_motor(joint, control_mode, pid, max_effort)
        if pid is not None and self._params.pid is not None:
            self._params.joint_gains(self._builder)[:, joint] = motor.pid
        self._queue_all(("set_joint_mode", (joint, control_mode, pid, max_effort), {}))

    def set_body_params(
        self,
        bodies,
        *,
        mass=None,
        inertia=None,
        static_friction=None,
        dynamic_friction=None,
        elasticity=None,
        vel_damping=None,
        gravity_scale=None,
        world=None,
    ):
        """Give bodies new physical values, in every world or per world (Scene.set_body_params:
        mass, inertia, static_friction, dynamic_friction, elasticity, vel_damping,
        gravity_scale; world a global index, mask or indices)."""
        self._check_open()
        values = dict(
            mass=mass,
            inertia=inertia,
            static_friction=static_friction,
            dynamic_friction=dynamic_friction,
            elasticity=elasticity,
            vel_damping=vel_damping,
            gravity_scale=gravity_scale,
        )
        rows = body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        given = {name: value for name, value in values.items() if value is not None}
        checked = self._params.check_body_values(self._builder, rows, worlds, given)
        if not given or not len(worlds):
            return
        self._params.set_body_values(self._builder, rows, worlds, checked)
        self._queue_worlds(
            worlds,
            lambda _, mine, local: (
                "set_body_params",
                (rows,),
                {"world": local, **{name: value[mine] for name, value in checked.items()}},
            ),
        )

    def set_shape_params(
        self,
        bodies,
        *,
        size=None,
        radius=None,
        length=None,
        vertices=None,
        inertia=None,
        position=None,
        angle=None,
        world=None,
    ):
        """Give bodies new shape sizes and static bodies new placements, in every world or
        per world (Scene.set_shape_params: size, radius, length, vertices, inertia,
        position, angle; world a global index, mask or indices). Checked here against every
        world, then each shard takes its worlds' values (one per world and body)."""
        self._check_open()
        arguments = dict(
            size=size,
            radius=radius,
            length=length,
            vertices=vertices,
            inertia=inertia,
            position=position,
            angle=angle,
        )
        arguments = {name: value for name, value in arguments.items() if value is not None}
        rows = body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        new, placed, masses = check_shape_change(
            self._builder, self._params, self._shapes, rows, worlds, arguments
        )
        resizes = any(name in arguments for name in SHAPE_PARAMS) or "inertia" in arguments
        if not len(worlds) or not arguments:
            return
        if "position" in arguments or "angle" in arguments:
            self._shapes.store_poses(self._builder, rows, worlds, placed)
        if resizes:
            self._shapes.store(self._builder, rows, worlds, new)
            self._params.set_body_values(self._builder, rows, worlds, masses)
        values = per_world_arguments(arguments, len(worlds), len(rows))
        self._queue_worlds(
            worlds,
            lambda _, mine, local: (
                "set_shape_params",
                (rows,),
                {"world": local, **{name: value[mine] for name, value in values.items()}},
            ),
        )

    def get_shape_params(self, bodies=None) -> dict[str, np.ndarray]:
        """Every world's shape sizes of `bodies` (None: all), as set_shape_params takes them
        (Scene.get_shape_params), from the driver's copy."""
        self._check_open()
        rows = np.arange(self.n_bodies) if bodies is None else body_indices(bodies, self.n_bodies)
        return self._shapes.params(self._builder, rows.tolist())

    def set_gravity(self, gravity):
        """Set the gravity of every world, (2,), or of each, (n_worlds, 2) (Scene.set_gravity)."""
        self._check_open()
        values = self._params.check_gravity(gravity)
        self._params.gravity = values
        every = np.ndim(gravity) <= 1
        self._queue_rows(lambda rows: ("set_gravity", (values[0] if every else values[rows],), {}))

    def set_joint_params(self, joints, *, pid=None, world=None):
        """Give joints' motors new PID gains per world (Scene.set_joint_params).

        Args:
            joints (int | array_like): joint indices.
            pid (array_like | None): (3,), (k_worlds, 3) or (k_worlds, k_joints, 3) gains.
            world (int | array_like | None): global worlds (None: every world).
        """
        self._check_open()
        rows = joint_indices(joints, self.n_joints)
        worlds = world_selection(world, self._n_worlds)
        if pid is None:
            return
        gains = self._params.check_gains(rows, worlds, pid)
        if not len(worlds):
            return
        self._params.set_gains(self._builder, rows, worlds, gains)
        self._queue_worlds(
            worlds,
            lambda _, mine, local: (
                "set_joint_params",
                (rows,),
                {"pid": gains[mine], "world": local},
            ),
        )

    def set_state(self, state: State, worlds=None):
        """Put `state` into every world, or into the given global worlds (Scene.set_state)."""
        self._check_open()
        if worlds is None:
            if not isinstance(state, State):
                raise TypeError(f"state must be a fx2d_gpu.State, got {type(state).__name__}")
            chosen = np.arange(self._n_worlds)
            arrays = check_state(state, self._n_worlds, self.n_bodies)
        else:
            chosen = world_selection(worlds, self._n_worlds, "worlds")
            arrays = state_rows(state, chosen, self._n_worlds, self.n_bodies)
        self._queue_worlds(
            chosen,
            lambda _, mine, local: ("set_state", (_state_rows(arrays, mine),), {"worlds": local}),
        )

    def reset_worlds(self, worlds, state=None):
        """Start the given global worlds over (Scene.reset_worlds): from the built initial
        state (None), from their rows of a State (n_worlds rows, or one per given world), or
        from a ShardedSnapshot of this scene."""
        self._check_open()
        if worlds is None:
            raise TypeError("worlds must be a world index, a bool mask or indices, got None")
        chosen = world_selection(worlds, self._n_worlds, "worlds")
        if state is None or isinstance(state, ShardedSnapshot):
            if isinstance(state, ShardedSnapshot):
                self._check_snapshot(state, "state")
            rows = None
        elif isinstance(state, State):
            rows = state_rows(state, chosen, self._n_worlds, self.n_bodies)
        else:
            raise TypeError(
                f"state must be None, a fx2d_gpu.State or a ShardedSnapshot, got "
                f"{type(state).__name__}"
            )
        if not len(chosen):
            return
        for force, torque in self._pending_forces.values():
            force[chosen], torque[chosen] = 0.0, 0.0
        self._queue_worlds(
            chosen,
            lambda index, mine, local: (
                "reset_worlds",
                (
                    local,
                    state.shards[index]
                    if isinstance(state, ShardedSnapshot)
                    else None
                    if rows is None
                    else _state_rows(rows, mine),
                ),
                {},
            ),
        )

    def set_enabled(self, bodies, enabled, world=None):
        """Take bodies out of the simulation or put them back (Scene.set_enabled).

        Args:
            bodies (int | array_like): body indices.
            enabled (bool | array_like): False takes them out, True puts them back: one
                bool, or (k_worlds, k_bodies) bools, a row per world of `world`, in its order.
            world (int | array_like | None): global worlds, as Scene.set_enabled takes them
                (world_params.world_selection).
        """
        self._check_open()
        indices = body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        flags = as_bool_table(enabled, "enabled", len(worlds), len(indices))
        self._queue_worlds(
            worlds, lambda _, mine, local: ("set_enabled", (indices, flags[mine]), {"world": local})
        )

    def set_collision_filter(
        self, body: int, collision_group=None, category_bits=None, mask_bits=None
    ):
        """Change `body`'s collision filter in every world (Scene.set_collision_filter).

        Args:
            body: a body index.
            collision_group (int | None): the body's group; None keeps it.
            category_bits (int | None): its categories, a 32-bit mask; None keeps them.
            mask_bits (int | None): the categories it collides with; None keeps them.
        """
        self._check_open()
        body = self._builder.check_body(body)
        self._builder.set_filter(body, collision_group, category_bits, mask_bits)
        self._queue_all(
            ("set_collision_filter", (body, collision_group, category_bits, mask_bits), {})
        )

    # ------------------------------------------------------------------ reading
    def get_columns(self, columns, dtype=np.float64, out=None) -> np.ndarray:
        """Chosen quantities of chosen bodies as the columns of one (n_worlds, m) array
        (Scene.get_columns), from the shards' states: each product taken in float32, as a
        Scene's kernel takes it.

        Args:
            columns (sequence): (body, quantity) or (body, quantity, scale) tuples, as
                Scene.get_columns takes them.
            dtype (numpy dtype): np.float64 or np.float32 of a new array.
            out (np.ndarray | None): a (n_worlds, m) float32 or float64 array (NumPy, or a
                CPU torch tensor) to fill and return, checked as Scene.get_columns checks it.

        Raises:
            TypeError, ValueError: as Scene.get_columns', before any shard is asked.
        """
        self._check_open()
        # "x64": the driver writes the array on the CPU (CPU tensors, as Scene on x64).
        spec, scales, out = columns_target(
            columns, self.n_bodies, self._n_worlds, float_dtype(dtype), out, backend="x64"
        )
        rows, where = np.unique(spec[:, 0], return_inverse=True)
        state = self.get_state(bodies=rows, dtype=np.float32)
        by_name = {
            "x": state.position[..., 0],
            "y": state.position[..., 1],
            "angle": state.angle,
            "vx": state.velocity[..., 0],
            "vy": state.velocity[..., 1],
            "angular_velocity": state.angular_velocity,
        }
        quantities = np.stack([by_name[name] for name in QUANTITIES])  # (quantity, world, row)
        values = scales * quantities[spec[:, 1], :, where].T  # float32, (world, column)
        out[...] = _as_target(values, out)
        return out

    def get_state(self, bodies=None, dtype=np.float64, out: State | None = None) -> State:
        """Every world's state, or that of some bodies (Scene.get_state), gathered from the
        shards.

        Args:
            bodies (int | array_like | None): None (every body) or body indices.
            dtype (numpy dtype): np.float64 or np.float32 of the float arrays (with `out`,
                its arrays' dtype).
            out (State | None): arrays (NumPy, or CPU torch tensors) of every world's rows
                to fill in, checked as Scene.get_state checks them (one check:
                readout.check_state_out); a field left None is not gathered.

        Raises:
            TypeError, ValueError: as Scene.get_state's, before any shard is asked.
        """
        self._check_open()
        if bodies is not None:
            bodies = body_indices(bodies, self.n_bodies)
        if out is not None:  # the shards send the dtype `out` holds (float32 halves it)
            n_rows = self.n_bodies if bodies is None else len(bodies)
            # "x64": the driver writes the rows on the CPU (CPU tensors, as Scene on x64).
            targets = check_state_out(out, self._n_worlds, n_rows, backend="x64")
            dtype = _out_dtype(targets)
        else:  # Scene.get_state's check, here: a shard's refusal would come back as Ray's
            dtype = float_dtype(dtype)
        parts = self._query_all(("get_state", (bodies, dtype), {}))
        if out is None:
            return _stacked(parts)
        for field in dataclasses.fields(State):
            target = getattr(out, field.name)
            if target is None:
                continue
            for shard, part in zip(self._shards, parts, strict=True):
                target[shard.worlds.start : shard.worlds.stop] = _as_target(
                    getattr(part, field.name), target
                )
        return out

    def get_body_params(self, bodies=None) -> dict[str, np.ndarray]:
        """Every world's values of `bodies` (None: all), as Scene.get_body_params (no round
        trip: the driver keeps them)."""
        self._check_open()
        rows = np.arange(self.n_bodies) if bodies is None else body_indices(bodies, self.n_bodies)
        values = self._params.body_values(self._builder)
        return {name: values[name][:, rows].copy() for name in BODY_PARAMS}

    def get_gravity(self) -> np.ndarray:
        """(n_worlds, 2) float64, m/s²: each world's gravity (a copy)."""
        self._check_open()
        return self._params.gravity.copy()

    def contacts(self, world: int | None = 0):
        """The pairs touching in global `world`, or in every world (None) (Scene.contacts;
        its world column global)."""
        self._check_open()
        if world is None:
            return self._gathered(("contacts", (None,), {}))
        world = as_index(world, "world", self._n_worlds, "worlds")
        index = self._shard_of(world)
        shard = self._shards[index]
        part = self._query_one(index, ("contacts", (world - shard.worlds.start,), {}))
        return _offset(part, shard.worlds.start, self._n_worlds)

    def touching(self, bodies=None) -> np.ndarray:
        """Which bodies touch another in each world (Scene.touching): (n_worlds, k) bool,
        the shards' rows in world order."""
        self._check_open()
        if bodies is not None:
            bodies = body_indices(bodies, self.n_bodies)  # (checked here, not in the shards)
        return np.concatenate(self._query_all(("touching", (bodies,), {})), axis=0)

    def contact_events(self) -> ContactEvents:
        """The last step's begin and end events of every world (Scene.contact_events)."""
        self._check_open()
        parts = self._query_all(("contact_events", (), {}))
        return ContactEvents(
            begin=self._joined([p.begin for p in parts]), end=self._joined([p.end for p in parts])
        )

    def candidate_pairs(self) -> np.ndarray:
        """The last broad phase's (world, body_a, body_b) candidate pairs, (k, 3) int64."""
        self._check_open()
        parts = self._query_all(("candidate_pairs", (), {}))
        return np.concatenate(
            [p + np.array([s.worlds.start, 0, 0]) for p, s in zip(parts, self._shards, strict=True)]
        )

    def collision_matrix(self) -> np.ndarray:
        """(n_bodies, n_bodies) bool: which two bodies of a world may ever collide
        (Scene.collision_matrix; shard 0's answer: every shard holds the same model and
        filters)."""
        self._check_open()
        return self._query_one(0, ("collision_matrix", (), {}))

    def enabled(self) -> np.ndarray:
        """(n_worlds, n_bodies) bool: which bodies take part in each world."""
        self._check_open()
        return np.concatenate(self._query_all(("enabled", (), {})))

    def joint_state(self):
        """Joint coordinates and rates in every world (Scene.joint_state)."""
        self._check_open()
        return _stacked(self._query_all(("joint_state", (), {})))

    def joint_errors(self) -> np.ndarray:
        """(n_worlds, n_joints) float64, m: every joint's residual (Scene.joint_errors)."""
        self._check_open()
        return np.concatenate(self._query_all(("joint_errors", (), {})))

    def joint_anchors(self) -> np.ndarray:
        """(n_worlds, n_joints, 2, 2): every joint's two anchors (Scene.joint_anchors)."""
        self._check_open()
        return np.concatenate(self._query_all(("joint_anchors", (), {})))

    # ------------------------------------------------------------------ queries
    def ray_cast(self, origins, directions, max_distance, *, sensors: bool = False):
        """The nearest body each ray hits, in every world (Scene.ray_cast).

        Args:
            origins (array_like): (2,), (n_rays, 2) or (n_worlds, n_rays, 2), m.
            directions (array_like): as origins.
            max_distance (float | array_like): a scalar or broadcastable to (n_worlds,
                n_rays), m.
            sensors: also hit sensors.
        """
        self._check_open()
        return _stacked(
            self._split_query(
                "ray_cast",
                {
                    "origins": (origins, 3),
                    "directions": (directions, 3),
                    "max_distance": (max_distance, 2),
                },
                {"sensors": sensors},
            )
        )

    def ray_cast_all(self, origins, directions, max_distance, *, sensors: bool = False):
        """Every body each ray crosses, in every world (Scene.ray_cast_all), the world
        column global; origins, directions, max_distance and sensors as ray_cast's."""
        self._check_open()
        return self._joined(
            self._split_query(
                "ray_cast_all",
                {
                    "origins": (origins, 3),
                    "directions": (directions, 3),
                    "max_distance": (max_distance, 2),
                },
                {"sensors": sensors},
            )
        )

    def query_point(self, points, *, sensors: bool = False):
        """The bodies containing each point, in every world (Scene.query_point).

        Args:
            points (array_like): (2,), (n_points, 2) or (n_worlds, n_points, 2), m.
            sensors: also report sensors.
        """
        self._check_open()
        return self._joined(
            self._split_query("query_point", {"points": (points, 3)}, {"sensors": sensors})
        )

    def query_aabb(self, lower, upper, *, sensors: bool = False):
        """The bodies overlapping each axis-aligned box, in every world (Scene.query_aabb).

        Args:
            lower (array_like): lower corners, (2,), (n_boxes, 2) or (n_worlds, n_boxes, 2).
            upper (array_like): upper corners, as lower.
            sensors: also report sensors.
        """
        self._check_open()
        return self._joined(
            self._split_query(
                "query_aabb", {"lower": (lower, 3), "upper": (upper, 3)}, {"sensors": sensors}
            )
        )

    def overlap_shape(self, shape, position, angle=0.0, *, sensors: bool = False):
        """The bodies each placed copy of `shape` overlaps, in every world
        (Scene.overlap_shape).

        Args:
            shape (fx2d_gpu.shapes.Shape): the shape placed at each position.
            position (array_like): (2,), (n_queries, 2) or (n_worlds, n_queries, 2), m.
            angle (float | array_like): rad, a scalar or broadcastable to (n_worlds,
                n_queries).
            sensors: also report sensors.
        """
        self._check_open()
        return self._joined(
            self._split_query(
                "overlap_shape",
                {"shape": (shape, None), "position": (position, 3), "angle": (angle, 2)},
                {"sensors": sensors},
            )
        )

    def inspect(self, fn: Callable, *args, shard: int = 0, **kwargs):
        """fn(scene, *args, **kwargs) run on `shard`'s Scene (worlds shard_worlds[shard],
        indexed from 0 there), and its result: e.g. render.render_worlds for a picture of the
        first worlds. `fn` must only read the scene: what it changes is not replayed when
        the shard is rebuilt."""
        self._check_open()
        index = as_index(shard, "shard", self.n_shards, "shards")
        return self._query_one(index, ("inspect", (fn, args, kwargs), {}))

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> ShardedSnapshot:
        """Everything that affects this scene's future: every shard's SceneSnapshot and the
        driver's values and pending forces. restore() it and step: the run repeats bitwise.
        It also becomes each shard's recovery point."""
        self._check_open()
        self._check_usable(changing=True)
        self._run_batches({i: ([], []) for i in range(self.n_shards)}, snapshot=True)
        self._snapshot_step = self.step_count
        return ShardedSnapshot(
            shards=[s.snapshot for s in self._shards],
            ranges=list(self._ranges),
            params=self._params.copy(),
            shapes=self._shapes.copy(),
            forces={b: (f.copy(), t.copy()) for b, (f, t) in self._pending_forces.items()},
            time=self.time,
            step_count=self.step_count,
        )

    def restore(self, snapshot: ShardedSnapshot):
        """Return to `snapshot`, taken from this scene (or one of the same model and shards).

        Every part is checked before any shard changes: here (its shards' worlds, each
        part a SceneSnapshot of that shard's model), then by each shard (Scene.restore's
        checks, changing nothing); only when all pass does any shard restore. A refusal
        changes nothing, here or on a shard. This is also the way back for a scene that
        refuses to step (a shard faulted, or a call was interrupted).

        Raises:
            TypeError: not a ShardedSnapshot.
            ValueError: its shards' worlds are not this scene's, or a part does not fit its
                shard (Scene.restore's checks), naming the shard and the field.
        """
        self._check_open()
        self._check_snapshot(snapshot, "snapshot")
        refs = [
            shard.actor.check_snapshot.remote(part)
            for shard, part in zip(self._shards, snapshot.shards, strict=True)
        ]
        self._outcomes(refs)  # every shard's verdict first, then the first refusal
        # Past this point the shards change: until every one has restored (and the driver
        # followed), an interruption leaves the scene refusing to step.
        self._broken, self._interrupted = "restore() was interrupted", True
        for shard in self._shards:
            shard.pending = []
        self._outcomes(
            [
                shard.actor.restore.remote(part)
                for shard, part in zip(self._shards, snapshot.shards, strict=True)
            ]
        )
        for shard, part in zip(self._shards, snapshot.shards, strict=True):
            shard.snapshot, shard.log, shard.lost = part, [], False
        self._params = snapshot.params.copy()
        self._shapes = (
            snapshot.shapes.copy()
            if snapshot.shapes is not None
            else WorldShapes.stacked(
                self._query_all(("inspect", (_shard_shapes, (), {}), {})), self._builder
            )
        )
        self._pending_forces = {b: (f.copy(), t.copy()) for b, (f, t) in snapshot.forces.items()}
        self.time, self.step_count = snapshot.time, snapshot.step_count
        self._snapshot_step = self.step_count
        self._broken, self._interrupted = None, False

    # ------------------------------------------------------------------ losing shards
    def recover(self):
        """Rebuild every lost shard (on_worker_loss="raise"): its actor (restarted by Ray, or
        a new one) restores its last snapshot and replays every change since, the call that
        found it lost included. Then the scene goes on bit for bit.

        Raises:
            ShardLostError: a shard could not be rebuilt within `timeout`.
        """
        self._check_open()
        for index, shard in enumerate(self._shards):
            if shard.lost:
                self._rebuild(index)

    def close(self):
        """Stop every shard's actor (their processes exit); after it, every call but the
        model's questions (n_bodies, body_index, ...) and the layout (n_worlds, n_shards,
        shard_worlds) raises RuntimeError. Closing twice is allowed. From another thread,
        while a call waits for its shards: that call raises RuntimeError at once, and
        starts no new actor. Otherwise the shards first write the kernels their processes
        compiled into Taichi's offline cache (at most FINISH_SECONDS), for the next shards
        to load."""
        self._close(finish=not getattr(self, "_calls_waiting", 0))

    def _close(self, finish: bool):
        """close()'s work; `finish`: the shards write their kernels first (_finish_shards)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True  # first: a call waiting on the shards must not rebuild them
        shards = getattr(self, "_shards", [])
        if finish:
            self._finish_shards(shards)
        for shard in shards:
            try:
                self._ray.kill(shard.actor, no_restart=True)
            except Exception:  # noqa: BLE001 (an actor already gone)
                pass

    def _finish_shards(self, shards: list[_Shard]):
        """Ask each shard's actor to write the kernels its process compiled into Taichi's
        offline cache (ShardWorker.finish), for at most FINISH_SECONDS, before close() kills
        them: Ray ends an actor with SIGKILL, and Taichi writes its cache only as its
        process ends normally, so every shard of every run compiled its kernels afresh
        (minutes on a CPU) where the next ones could load them. Not while a call waits on
        the shards (close() from another thread: their actors are busy, and that call must
        end at once), nor where the shards failed to start."""
        finishing = []
        for shard in shards:
            if not shard.lost:
                try:
                    finishing.append(shard.actor.finish.remote(os.getpid()))
                except Exception:  # noqa: BLE001 (an actor already gone)
                    pass
        if finishing:
            self._ray.wait(finishing, num_returns=len(finishing), timeout=FINISH_SECONDS)

    def __enter__(self) -> ShardedScene:
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (
            f"ShardedScene(n_worlds={self._n_worlds}, n_shards={self.n_shards}, "
            f"n_bodies={self.n_bodies})"
        )

    # ------------------------------------------------------------------ internals
    def _start_actor(self, worlds: range):
        return self._actor_class.remote(self._source, len(worlds))

    def _check_open(self):
        """Refuse any call on a closed scene (close() above)."""
        if getattr(self, "_closed", True):
            raise RuntimeError("the ShardedScene is closed")

    def _describe_started(self, options: dict) -> list[dict]:
        """Each shard's describe(), once its actor has started and built its scene. Waits
        first for the actors (a timeout then is the cluster's resources), then for the
        builders (a timeout then is a builder that does not return; a process that dies is
        reported as such)."""
        ray = self._ray
        try:
            ray.get([s.actor.ping.remote() for s in self._shards], timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"the {self.n_shards} shards' actors did not start within {self.timeout:g} s: "
                f"does the cluster have {options} free for each of them?"
            ) from None
        refs = [s.actor.describe.remote() for s in self._shards]
        deadline = time.monotonic() + self.timeout
        described = []
        for index, (shard, ref) in enumerate(zip(self._shards, refs, strict=True)):
            where = f"shard {index} (worlds {_span(shard.worlds)})"
            try:
                described.append(ray.get(ref, timeout=max(deadline - time.monotonic(), 0.1)))
            except ray.exceptions.GetTimeoutError:
                raise TimeoutError(
                    f"{where}: its scene was not built within "
                    f"{self.timeout:g} s (does the builder return?)"
                ) from None
            except ray.exceptions.RayTaskError as error:
                raise (getattr(error, "cause", None) or error) from None
            except self._lost_errors() as lost:
                raise ShardLostError(
                    f"{where}: its process died while building its scene ({type(lost).__name__}"
                    f"): the builder, or code it calls, ended the process (a crash, a signal, "
                    f"os._exit, the OOM killer)",
                    index,
                    shard.worlds,
                ) from None
        return described

    def _outcomes(self, refs: list) -> list:
        """Every shard's result of `refs` (one a shard, in order), waiting for all of them
        before raising the first failure (naming its shard)."""
        results, failure = [], None
        for index, ref in enumerate(refs):
            shard = self._shards[index]
            try:
                results.append(self._ray.get(ref))
            except self._ray.exceptions.RayTaskError as error:
                failure = failure or self._shard_error(index, error)
            except self._lost_errors() as lost:
                self._check_open()  # closed from another thread while waiting
                failure = failure or ShardLostError(
                    f"shard {index} (worlds {_span(shard.worlds)}) was lost "
                    f"({type(lost).__name__})",
                    index,
                    shard.worlds,
                )
        if failure is not None:
            raise failure
        return results

    def _check_usable(self, changing: bool = False):
        """Refuse a call on a closed scene or one with a lost shard, and a step or snapshot
        on shards that may no longer agree (a shard faulted, or a call was interrupted)."""
        self._check_open()
        lost = [i for i, s in enumerate(self._shards) if s.lost]
        if lost:
            shard = self._shards[lost[0]]
            raise ShardLostError(
                f"shard {lost[0]} (worlds {_span(shard.worlds)}) was lost; "
                "call recover() to rebuild it",
                lost[0],
                shard.worlds,
            )
        if changing and self._broken is not None:
            raise RuntimeError(
                f"the shards may no longer agree with each other or with the "
                f"driver ({self._broken}); restore() a snapshot to go on"
            )

    def _check_snapshot(self, snapshot, name: str):
        """The driver's checks of a ShardedSnapshot given as argument `name`: its shards'
        worlds, and each part a SceneSnapshot of its shard's model (the fingerprint of the
        shard's own recovery snapshot: a snapshot of another scene is refused here, not by a
        shard at the next step). The shards check the rest of each part."""
        if not isinstance(snapshot, ShardedSnapshot):
            raise TypeError(f"{name} must be a ShardedSnapshot, got {type(snapshot).__name__}")
        if list(snapshot.ranges) != list(self._ranges):
            raise ValueError(
                f"{name}: the snapshot's shards hold worlds "
                f"{[_span(r) for r in snapshot.ranges]}, this scene's "
                f"{[_span(r) for r in self._ranges]}"
            )
        if not isinstance(snapshot.shards, list) or len(snapshot.shards) != self.n_shards:
            raise ValueError(f"{name}: the snapshot must hold {self.n_shards} shards' parts")
        for index, (shard, part) in enumerate(zip(self._shards, snapshot.shards, strict=True)):
            if not isinstance(part, SceneSnapshot):
                raise TypeError(
                    f"{name}: shard {index}'s part must be a SceneSnapshot, got "
                    f"{type(part).__name__}"
                )
            if part.fingerprint != shard.snapshot.fingerprint:
                raise ValueError(
                    f"{name}: shard {index}'s part is a snapshot of another "
                    "scene (its bodies, joints, disabled pairs or worlds differ)"
                )
        if (
            not isinstance(snapshot.params, WorldParams)
            or snapshot.params.n_worlds != self._n_worlds
        ):
            raise ValueError(
                f"{name}: the snapshot's per-world values are not of {self._n_worlds} worlds"
            )

    def _shard_of(self, world: int) -> int:
        return next(i for i, s in enumerate(self._shards) if world in s.worlds)

    def _queue_rows(self, command: Callable[[slice], tuple]):
        """Queue command(rows) on every shard, rows its slice of the global worlds."""
        for shard in self._shards:
            shard.pending.append(command(slice(shard.worlds.start, shard.worlds.stop)))

    def _queue_worlds(self, worlds: np.ndarray, command: Callable):
        """Queue command(index, mine, local) on each shard holding some of global `worlds`
        ((k,) distinct indices in the caller's order, world_selection's): mine, the positions
        in `worlds` of those it holds (index the per-world rows with it); local, their
        indices there. Each shard takes its worlds in ascending order: a shard's Scene reads
        a State of as many rows as it has worlds as each world's own row, which they then
        are whatever order the caller gave."""
        for index, shard in enumerate(self._shards):
            held = np.flatnonzero((worlds >= shard.worlds.start) & (worlds < shard.worlds.stop))
            if len(held):
                mine = held[np.argsort(worlds[held], kind="stable")]
                shard.pending.append(command(index, mine, worlds[mine] - shard.worlds.start))

    def _queue_all(self, command: tuple):
        for shard in self._shards:
            shard.pending.append(command)

    def _query_all(self, command: tuple) -> list:
        """command's result on every shard (after their queued changes)."""
        results = self._run_batches({i: ([], [command]) for i in range(self.n_shards)})
        return [results[i][-1] for i in range(self.n_shards)]

    def _query_one(self, index: int, command: tuple):
        return self._run_batches({index: ([], [command])})[index][-1]

    def _split_query(self, name: str, per_world: dict, kwargs: dict) -> list:
        """Run query `name` on every shard, each argument cut to the shard's worlds where it
        is given per world (ndim == the per-world form's: (n_worlds, n, 2) points, or
        (n_worlds, n) scalars)."""
        for label, (value, ndim) in per_world.items():
            if (
                ndim is not None
                and np.ndim(value) == ndim
                and np.shape(value)[0] not in (self._n_worlds, 1)
            ):
                raise ValueError(
                    f"{label}: a per-world array must have n_worlds="
                    f"{self._n_worlds} rows, got shape {np.shape(value)}"
                )
        batches = {}
        for i, shard in enumerate(self._shards):
            args = []
            for value, ndim in per_world.values():
                if (
                    ndim is not None
                    and np.ndim(value) == ndim
                    and np.shape(value)[0] == self._n_worlds
                ):
                    value = np.asarray(value)[shard.worlds.start : shard.worlds.stop]
                args.append(value)
            batches[i] = ([], [(name, tuple(args), kwargs)])
        results = self._run_batches(batches)
        return [results[i][-1] for i in range(self.n_shards)]

    def _gathered(self, command: tuple):
        return self._joined(self._query_all(command))

    def _joined(self, parts: list):
        """Row records (Contacts, event lists, hit lists, overlaps) of the shards as one,
        their world column made global."""
        return _stacked(
            [
                _offset(p, s.worlds.start, self._n_worlds)
                for p, s in zip(parts, self._shards, strict=True)
            ]
        )

    def _run_batches(
        self, batches: dict[int, tuple[list, list]], snapshot: bool = False
    ) -> dict[int, list]:
        """Send each shard in `batches` its queued changes, then (changes, queries) of the
        batch, all shards at once; collect the results. A shard's changes go to its log (or,
        with a snapshot, replace it); a lost shard is rebuilt or reported.

        An exception that ends this call before every shard's outcome is accounted for (a
        KeyboardInterrupt while waiting, close() from another thread) leaves the driver
        unable to tell what the shards did: the scene then refuses to step until restore()
        (the rule in docs/distributed.md)."""
        self._check_usable()
        before = self._broken
        # Pessimistic until every outcome is in the logs: an interruption anywhere below
        # leaves this mark.
        self._broken = "a call was interrupted while its shards ran"
        self._calls_waiting += 1
        try:
            results, failure = self._collect(batches, snapshot)
        except BaseException as error:
            self._broken = (
                f"a call was interrupted by {type(error).__name__} while its "
                "shards ran: the driver cannot tell how far they got"
            )
            self._interrupted = True
            raise
        finally:
            self._calls_waiting -= 1
        self._broken = before
        if failure is not None:
            raise failure
        return results

    def _collect(
        self, batches: dict[int, tuple[list, list]], snapshot: bool
    ) -> tuple[dict[int, list], Exception | None]:
        """_run_batches' work: (each shard's results, the first failure to raise or None)."""
        refs, sent = {}, {}
        for index, (changes, queries) in batches.items():
            shard = self._shards[index]
            changes = shard.pending + changes
            shard.pending = []
            sent[index] = (changes, queries)
            refs[index] = shard.actor.run.remote(changes + queries, snapshot)
        results, failure = {}, None
        for index, ref in refs.items():  # every shard's outcome first, then any error
            changes, queries = sent[index]
            shard = self._shards[index]
            try:
                values, kept = self._ray.get(ref)
            except self._lost_errors() as lost:
                self._check_closed_while_waiting()
                if changes:  # done by the other shards: part of this shard's history now
                    shard.log.append(changes)
                shard.lost = True
                if self.on_worker_loss == "raise":
                    failure = failure or ShardLostError(
                        f"shard {index} (worlds {_span(shard.worlds)}) was lost "
                        f"({type(lost).__name__}); the other shards did this call's work: "
                        "call recover() to rebuild it from its last snapshot",
                        index,
                        shard.worlds,
                    )
                    continue
                try:
                    values = self._rebuild(index)
                except ShardLostError as error:
                    failure = failure or error
                    continue
                more, kept = self._ray.get(shard.actor.run.remote(queries, snapshot))
                values = values + more
            except self._ray.exceptions.RayTaskError as error:
                if changes:
                    shard.log.append(changes)
                failure = failure or self._shard_error(index, error)
                continue
            else:
                if changes:
                    shard.log.append(changes)
            if kept is not None:  # the new recovery point: the log starts over
                shard.snapshot, shard.log = kept, []
            results[index] = values
        return results, failure

    def _check_closed_while_waiting(self):
        """A shard lost because close() (another thread) killed it: no rebuild, no new
        actor; the waiting call raises."""
        if self._closed:
            raise RuntimeError("the ShardedScene was closed while this call waited for its shards")

    def _lost_errors(self) -> tuple:
        exceptions = self._ray.exceptions
        return (exceptions.RayActorError, exceptions.ActorUnavailableError)

    def _rebuild(self, index: int) -> list:
        """Bring shard `index` back: wait for its actor (restarted by Ray; a new one past
        max_restarts), restore its snapshot, replay its log. Returns the results of the
        log's last batch (the one that found the shard lost), [] for an empty log."""
        shard = self._shards[index]
        if self._interrupted:  # its log may lack what the interrupted call had it do
            raise ShardLostError(
                f"shard {index} (worlds {_span(shard.worlds)}) was lost after an interrupted "
                "call, so its log may not hold everything it did: restore() a snapshot",
                index,
                shard.worlds,
            )
        deadline = time.monotonic() + self.timeout
        while True:
            self._check_closed_while_waiting()
            try:
                shard.pid = self._ray.get(
                    shard.actor.ping.remote(), timeout=max(deadline - time.monotonic(), 0.1)
                )
                self._ray.get(shard.actor.restore.remote(shard.snapshot))
                values = []
                for batch in shard.log:
                    values, _ = self._ray.get(shard.actor.run.remote(batch, False))
                shard.lost = False
                return values
            except self._ray.exceptions.ActorDiedError:
                self._check_closed_while_waiting()
                shard.actor = self._start_actor(shard.worlds)  # Ray gave up restarting it
            except (
                self._ray.exceptions.ActorUnavailableError,
                self._ray.exceptions.RayActorError,
                self._ray.exceptions.GetTimeoutError,
            ) as cause:
                if time.monotonic() > deadline:
                    raise ShardLostError(
                        f"shard {index} (worlds {_span(shard.worlds)}) could not be rebuilt "
                        f"within {self.timeout:g} s ({type(cause).__name__})",
                        index,
                        shard.worlds,
                    ) from None
                time.sleep(0.2)

    def _shard_error(self, index: int, error) -> Exception:
        """The exception a shard raised, as the caller should see it: its own type, naming
        the shard (a SimulationError's worlds made global)."""
        cause = getattr(error, "cause", None) or error
        shard = self._shards[index]
        where = f"shard {index} (worlds {_span(shard.worlds)}, counted from {shard.worlds.start})"
        if isinstance(cause, SimulationError):
            return SimulationError(
                f"{where}: {cause}",
                np.asarray(cause.worlds) + shard.worlds.start,
                np.asarray(cause.bodies),
            )
        try:
            return type(cause)(f"{where}: {cause}")
        except Exception:  # noqa: BLE001 (an exception type that takes other arguments)
            return cause


def _check_source(builder, template) -> Source:
    if (builder is None) == (template is None):
        raise TypeError(
            "give exactly one of builder (a function n_worlds -> Scene) and "
            "template (a one-world Scene)"
        )
    if template is not None:
        if not isinstance(template, Scene):
            raise TypeError(f"template must be a fx2d_gpu.Scene, got {type(template).__name__}")
        if template.n_worlds != 1:
            raise ValueError(
                f"template must be a one-world Scene, got {template.n_worlds} "
                "worlds (give a builder for anything else)"
            )
        return template
    if not callable(builder):
        raise TypeError(
            f"builder must be callable (n_worlds -> Scene), got {type(builder).__name__}"
        )
    return builder


def _shard_shapes(scene: Scene) -> WorldShapes:
    """A shard's per-world shapes (restore of a snapshot without the driver's copy)."""
    return scene._shapes.copy()


def _span(worlds: range) -> str:
    return f"{worlds.start}-{worlds.stop - 1}"


def _offset(record, first_world: int, n_worlds: int):
    """A row record (Contacts, ContactEventList, RayHitList, Overlaps) with its world column
    moved by `first_world` and its n_worlds the whole scene's."""
    return dataclasses.replace(record, world=record.world + first_world, n_worlds=n_worlds)


def _stacked(parts: list):
    """Records of the shards' worlds, one after another, as one record: every array field
    concatenated along its first axis; other fields (counts) taken from the first."""
    first = parts[0]
    values = {}
    for field in dataclasses.fields(first):
        value = getattr(first, field.name)
        if isinstance(value, np.ndarray):
            value = np.concatenate([getattr(p, field.name) for p in parts])
        values[field.name] = value
    return type(first)(**values)


def _state_rows(arrays: dict, mine: np.ndarray) -> State:
    """The rows `mine` of checked state arrays (builder.check_state's dict) as a State."""
    return State(*(arrays[field.name][mine] for field in dataclasses.fields(State)))


def _out_dtype(targets: dict) -> type:
    """np.float32 where get_state's checked `out` arrays ({field: array}, NumPy or torch)
    hold float32, else np.float64."""
    for name, array in targets.items():
        if name != "sleeping":
            return np.float32 if str(array.dtype).endswith("float32") else np.float64
    return np.float64


def _as_target(part: np.ndarray, target):
    """`part` in the form `target` (a NumPy array or a torch tensor) takes by assignment."""
    if isinstance(target, np.ndarray):
        return part
    import torch  # (only reached with torch tensors in `out`)

    return torch.from_numpy(np.ascontiguousarray(part))
