"""A vector env's step with its per-world work on the device: the actions pushed in one
launch, the restarting worlds drawn and written and every observation gathered in another.

On the host path (base.Fx2DVectorEnv) a vector step turns the actions into forces in NumPy
(apply_force checks a (num_envs, 2) array, the step uploads it as a table of pushes), draws
the restarting worlds' numbers from their streams (WorldStreams), builds their initial
states as a State (the task's _initial_states), checks it and uploads it as a table
(reset_worlds), then gathers the observation (get_columns): three launches given six NumPy
arrays, each copied to a GPU and back around its launch (launching.host_array_count), and
at 65,536 cart-poles some 3 ms of NumPy on the 2-core CPU VM besides
(`benchmarks/env_host.py`). A task with a DeviceTask does that work a world a thread:

- push (`DeviceStep.push`): one launch given the checked actions as they are: each
  world's push (the task's `push`) added to its body's applied force as apply_force's
  upload adds it (transfer.add_push). A world that restarts in this step (NEXT_STEP: it
  ended at the last one) is pushed too, where the host path pushes it with 0: its step
  is discarded by the restart that follows it, forces and all;
- then the scene's step;
- restart and observe (`DeviceStep.observe`): one launch given the restart flags and the
  observation's array: each restarting world draws its numbers from its stream on the
  device (`stream_draws`: the SplitMix64 numbers WorldStreams would draw, whose counts
  follow, WorldStreams.skip), each of its bodies takes the task's initial row
  (`initial_row`, from the built state) as reset_worlds(worlds, state) writes it
  (transfer.write_body_row: awake, no force; restart_joint; forget_contact), and every
  world's observation columns are gathered (gather.column_value, as get_columns).

Scoring stays on the host (the task's _score reads the observation). The same numbers as
the host path, bit for bit: the pushes and initial states are worked out in float64 and
stored in float32 as the host's are (tests/test_env_device_step.py compares the two paths
step by step). Used where it can be (DeviceStep.usable): a Scene in this process (not
sharded), no domain randomisation (its draws set masses and gravity through the host),
and a backend with 64-bit integers and floats and their sines (CPU and CUDA; not Vulkan,
whose SPIR-V has no 64-bit sine, nor Metal or OpenGL).
"""

from typing import TYPE_CHECKING

import gymnasium
import numpy as np
import taichi as ti

import fx2d_gpu as fx

from ..access import readout
from ..access.gather import check_columns, column_value
from ..device import runtime
from ..device.launching import quick
from ..device.transfer import (
    ROW_COLUMNS,
    add_push,
    forget_contact,
    restart_joint,
    state_table,
    write_body_row,
    write_target,
)
from ..physics.collision.ray_casts import nearest_in_world
from .base import DRAW_SHIFT, GOLDEN_GAMMA, MIX_MULTIPLIERS, MIX_SHIFTS

if TYPE_CHECKING:
    from .base import Fx2DVectorEnv

#: Backends whose kernels have 64-bit integers, floats and sines (the streams and the
#: initial states' arithmetic): Taichi's arch names (SPIR-V's GLSL sine is 32-bit at most).
_WIDE_ARCHS = ("x64", "arm64", "cuda")
_FLAGS = ti.types.ndarray(dtype=ti.u8, ndim=1)
_U64_ARRAY = ti.types.ndarray(dtype=ti.u64, ndim=1)
_VALUES = len(ROW_COLUMNS)


class DeviceTask:
    """What a task does per world on the device: a template argument of the kernels (so
    one instance per distinct set of values, `of`), with its constants as attributes.

    Subclasses define, as static ti.funcs taking the task first:

    - push(task, actions, bodies, world) -> ti.Vector([force x, force y, torque]) float32
      (N, N m): world's action (actions: the checked array, as _check_actions returns it)
      as a push on body `pushed_body` (bodies: the scene's, at the poses the last
      observation read); the same float64 arithmetic as the task's _apply_actions, stored
      in float32 as apply_force's upload stores it.
    - initial_row(task, draws, body, row) -> row: body's initial row (ROW_COLUMNS' first
      six, float32) given the world's draws (ti.Vector of n_draws float64 in [0, 1)) and
      the built state's row; the same arithmetic as the task's _initial_states.
    - observe(task, bodies, world, slot, x, y, angle, world_values, out), where
      `observes`: writes world's row of `out` ((n_worlds, n_observed + n_extra) float32)
      but its lidar's columns: the task's own observation, as its _observe computes it,
      in place of the gathered columns, given body observed_body's slot and pose (x, y m,
      angle rad: float64s of the scene's float32) and world_values ((n_worlds,
      n_world_values) float64, as set_world_values set them). Each lidar ray is a thread
      of its own beside it (lidar_reach).
    - drive(task, actions, world, i) -> float32, where `drives`: world's motor target of
      joint driven_joints[i], set as set_joint_target sets it (a new target wakes the
      joint's bodies), in place of push.

    Attributes:
        pushed_body (int): the body the actions push.
        n_draws (int): uniform draws a world takes at each restart (its n_state_draws).
        touch_bodies (tuple[int, ...]): bodies whose contact flags the observation reads:
            out[world, touch_columns[i]] is 1.0 where body touch_bodies[i] of world is in
            one of the pairs Scene.touching reads (after a step, its reported contacts),
            0.0 where not and in a world that restarts (readout.touching, read before the
            restarts as the task's _read_after_step reads it).
        touch_columns (tuple[int, ...]): their columns of `out`.
        observes (bool): the observation is the task's (observe), not gathered columns.
        observed_body (int): the body observe's pose is of, and the lidar rides on.
        n_observed (int): the observation's columns, where `observes`.
        n_rays (int): the lidar's rays (0: none), riding observed_body: ray r's reach
            over lidar_range clipped to column lidar_column + r's bounds (lidar_reach; its
            directions ray_x, ray_y, its start lidar_start, the bounds low and high).
        n_extra (int): columns of `out` after the observation, handed to the env's
            _take_device_extras(extras), which a task with extras defines ((num_envs,
            n_extra) float32: what its scoring reads besides the observation).
        n_world_values (int): per-world float64 values the observation reads.
        drives (bool): the actions set motor targets (drive), not a push.
        driven_joints (tuple[int, ...]): the joints drive sets.
        restarts_on_host (bool): the worlds that restart are written by the host's path
            (the env's _reset_worlds: a task whose restart writes more than a state, the
            Levels' levels) before the observation's launch, which restarts none.
    """

    pushed_body: int = 0
    n_draws: int = 0
    touch_bodies: tuple = ()
    touch_columns: tuple = ()
    observes: bool = False
    observed_body: int = 0
    n_observed: int = 0
    n_rays: int = 0
    n_extra: int = 0
    n_world_values: int = 0
    drives: bool = False
    driven_joints: tuple = ()
    restarts_on_host: bool = False
    _instances: dict = {}

    @staticmethod
    @ti.func
    def initial_row(task: ti.template(), draws, body, row):
        return row  # (a task that restarts on the host: never called)

    @classmethod
    def of(cls, **values) -> "DeviceTask":
        """The instance of `values` (attribute name -> int, float, bool or a tuple of
        them): one a set of values, so the kernels compile once for it."""
        key = (cls, tuple(sorted(values.items())))
        task = DeviceTask._instances.get(key)
        if task is None:
            task = cls()
            for name, value in values.items():
                setattr(task, name, value)
            DeviceTask._instances[key] = task
        return task


@ti.func
def _mix64(z):
    """SplitMix64's output function (base._mix64's) on a uint64."""
    z = (z ^ (z >> MIX_SHIFTS[0])) * ti.u64(MIX_MULTIPLIERS[0])
    z = (z ^ (z >> MIX_SHIFTS[1])) * ti.u64(MIX_MULTIPLIERS[1])
    return z ^ (z >> MIX_SHIFTS[2])


@ti.func
def stream_draws(keys: ti.template(), counts: ti.template(), world, n: ti.template()):
    """ti.Vector of world's next n uniform float64 draws in [0, 1), the numbers
    WorldStreams.uniform gives (its counts are not advanced here)."""
    draws = ti.Vector([0.0] * n, dt=ti.f64)
    for i in ti.static(range(n)):
        step = counts[world] + ti.u64(i + 1)
        bits = _mix64(keys[world] + step * ti.u64(GOLDEN_GAMMA))
        draws[i] = ti.cast(bits >> DRAW_SHIFT, ti.f64) * ti.f64(2.0 ** -(64 - DRAW_SHIFT))
    return draws


@quick
@ti.kernel
def _push(
    task: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    serial: ti.template(),
    actions: ti.types.ndarray(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
):
    """Each world's push added to its body task.pushed_body's applied force, or (a task
    that drives) its motor targets set."""
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        if ti.static(task.drives):
            for i in ti.static(range(len(task.driven_joints))):
                joint = task.driven_joints[i]
                target = task.drive(task, actions, world, i)
                write_target(joints, bodies, joint, world, n_joints, n_bodies, target)
        else:
            push = task.push(task, actions, bodies, world)
            slot = world * n_bodies + task.pushed_body
            add_push(bodies, slot, ti.math.vec2(push[0], push[1]), push[2])


@quick
@ti.kernel
def _restart_and_observe(
    task: ti.template(),
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    listed: ti.template(),
    listed_with_points: ti.template(),
    serial: ti.template(),
    restart: _FLAGS,
    keys: _U64_ARRAY,
    counts: _U64_ARRAY,
    built: ti.types.ndarray(dtype=ti.f32, ndim=2),
    targets: ti.types.ndarray(dtype=ti.f32, ndim=1),
    spec: ti.types.ndarray(dtype=ti.i32, ndim=2),
    scales: ti.types.ndarray(dtype=ti.f32, ndim=1),
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    n_listed: ti.i32,
    world_values: ti.types.ndarray(dtype=ti.f64, ndim=2),
    out: ti.types.ndarray(dtype=ti.f32, ndim=2),
):
    """The task's contact flags read from the `listed` pairs (n_listed of them; with
    points only where listed_with_points: readout.listed_pairs'); the worlds flagged in
    `restart` start over (as reset_worlds(worlds, state) with the task's initial rows),
    their streams advanced and their flags cleared; then every world's observation: the
    task's (observe) or out[world, j] = column j (get_columns')."""
    n_worlds = restart.shape[0]
    if ti.static(len(task.touch_bodies) > 0):
        ti.loop_config(serialize=serial)
        for world in range(n_worlds):
            for i in ti.static(range(len(task.touch_bodies))):
                out[world, task.touch_columns[i]] = 0.0
        # (Every writer writes 1.0: the order of the threads does not matter.)
        ti.loop_config(serialize=serial)
        for pair in range(n_listed):
            if ti.static(not listed_with_points) or listed.point_count[pair] > 0:
                for end in ti.static(range(2)):
                    slot = listed.body_a[pair] if end == 0 else listed.body_b[pair]
                    body = slot % n_bodies
                    for i in ti.static(range(len(task.touch_bodies))):
                        if body == task.touch_bodies[i]:
                            out[slot // n_bodies, task.touch_columns[i]] = 1.0
    ti.loop_config(serialize=serial)
    for slot in range(n_worlds * n_bodies):
        world = slot // n_bodies
        if restart[world] != 0:
            body = slot % n_bodies
            row = ti.Vector([built[body, c] for c in ti.static(range(_VALUES - 1))])
            row = task.initial_row(task, stream_draws(keys, counts, world, task.n_draws), body, row)
            position = ti.math.vec2(row[0], row[1])
            velocity = ti.math.vec2(row[3], row[4])
            write_body_row(bodies, slot, position, row[2], velocity, row[5], 0, True, True)
    ti.loop_config(serialize=serial)
    for joint_slot in range(n_worlds * n_joints):
        if restart[joint_slot // n_joints] != 0:
            restart_joint(joints, joint_slot, targets[joint_slot % n_joints])
    ti.loop_config(serialize=serial)
    for pair in range(n_pairs):
        if restart[manifolds.body_a[pair] // n_bodies] != 0:
            forget_contact(manifolds, pair)
    # (After the bodies' loop, which read the counts.)
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        if restart[world] != 0:
            counts[world] += ti.u64(task.n_draws)
            for i in ti.static(range(len(task.touch_bodies))):
                out[world, task.touch_columns[i]] = 0.0
    if ti.static(task.observes):
        # A thread for each lidar ray of a world, and one for the rest of its observation.
        ti.loop_config(serialize=serial)
        for world, part in ti.ndrange(n_worlds, task.n_rays + 1):
            slot = world * n_bodies + task.observed_body
            x = ti.cast(bodies.position[slot].x, ti.f64)
            y = ti.cast(bodies.position[slot].y, ti.f64)
            angle = ti.cast(bodies.angle[slot], ti.f64)
            if part < task.n_rays:
                reach = lidar_reach(task, model, bodies, world, n_bodies, x, y, angle, part)
                out[world, task.lidar_column + part] = clipped(
                    reach / ti.f64(task.lidar_range), task, task.lidar_column
                )
            else:
                task.observe(task, bodies, world, slot, x, y, angle, world_values, out)
    else:
        ti.loop_config(serialize=serial)
        for world, j in ti.ndrange(n_worlds, spec.shape[0]):
            out[world, j] = column_value(
                bodies, world * n_bodies + spec[j, 0], spec[j, 1], scales[j]
            )


@ti.func
def clipped(value, task: ti.template(), column: ti.template()):
    """A float64 observation value clipped to column `column`'s bounds (task.low and
    task.high: the observation space's float32 bounds), as np.clip, stored in float32."""
    return ti.cast(
        ti.min(ti.max(value, ti.f64(task.low[column])), ti.f64(task.high[column])), ti.f32
    )


@ti.func
def lidar_reach(
    task: ti.template(),
    model: ti.template(),
    bodies: ti.template(),
    world,
    n_bodies,
    x,
    y,
    angle,
    ray,
):
    """The reach (m, float64) of lidar ray `ray` of a body at (x, y) m turned by `angle`
    rad (float64s of the scene's float32): the nearest hit's distance up to
    task.lidar_range, else lidar_range; the numbers the host's path gets from
    scene.ray_cast bit for bit (a task's _lidar: its directions task.ray_x, ray_y in the
    body's frame, turned, its origins task.lidar_start along them, in float64; ray_cast
    normalises the directions and casts in float32). Each ray is tested against its world's
    bodies in turn (ray_casts.nearest_in_world, the grid walk's answer), from an origin
    inside the box around the world's bodies (it holds the body the lidar rides on, within
    ray_cast's 1 m pad), which ray_cast's approach never moves."""
    # (each entry a ti.f64: a bare literal would be a float32 first)
    local = ti.Matrix(
        [[ti.f64(task.ray_x[r]), ti.f64(task.ray_y[r])] for r in ti.static(range(task.n_rays))]
    )
    c, s = ti.cos(angle), ti.sin(angle)
    lx, ly = local[ray, 0], local[ray, 1]
    dx = c * lx - s * ly
    dy = s * lx + c * ly
    ox = x + ti.f64(task.lidar_start) * dx
    oy = y + ti.f64(task.lidar_start) * dy
    length = ti.sqrt(dx * dx + dy * dy)  # (ray_cast's hypot: the same below float32's bits)
    origin = ti.math.vec2(ti.cast(ox, ti.f32), ti.cast(oy, ti.f32))
    direction = ti.math.vec2(ti.cast(dx / length, ti.f32), ti.cast(dy / length, ti.f32))
    limit = ti.cast(ti.f64(task.lidar_range), ti.f32)
    body, t, _ = nearest_in_world(model, bodies, world, n_bodies, origin, direction, limit)
    reach = ti.f64(task.lidar_range)
    if body >= 0:
        reach = ti.cast(t, ti.f64)
    return reach


def _device_array(values: np.ndarray, dtype) -> ti.Ndarray:
    array = ti.ndarray(dtype, values.shape)
    array.from_numpy(values)
    return array


class DeviceStep:
    """The device's side of a vector env's step (module docstring): its task, the
    streams' copy, the built rows and motor targets, the observation's columns.

    Args:
        env: the vector env (a Scene in this process, its streams, its built state).
        task: the env's DeviceTask.
        columns: the observation, as Scene.get_columns takes it; () where the task
            observes itself (task.observes).
    """

    def __init__(self, env: "Fx2DVectorEnv", task: "DeviceTask", columns=()):
        scene = env.scene
        self.env = env
        self.task = task
        n = env.num_envs
        built = env._built_state
        table = state_table(
            built.position, built.angle, built.velocity, built.angular_velocity, 0 * built.angle
        )
        self._built = _device_array(np.ascontiguousarray(table[:, : _VALUES - 1]), ti.f32)
        targets = scene._reset_targets()
        self._targets = _device_array(targets if targets.size else np.zeros(1, np.float32), ti.f32)
        if task.observes:
            spec, scales = np.zeros((1, 2), np.int32), np.zeros(1, np.float32)  # (unread)
            self._n_columns = task.n_observed
        else:
            spec, scales = check_columns(columns, scene.n_bodies)
            self._n_columns = len(spec)
        self._spec = _device_array(spec, ti.i32)
        self._scales = _device_array(scales, ti.f32)
        self._keys = ti.ndarray(ti.u64, n)
        self._counts = ti.ndarray(ti.u64, n)
        # No world's restart flag, kept on the device: a step where none restarts (a good
        # policy's) hands the device no flags.
        self._no_world = _device_array(np.zeros(n, np.uint8), ti.u8)
        self._streams_version = None
        self._world_values = ti.ndarray(ti.f64, (n, max(task.n_world_values, 1)))
        # Discrete actions as bytes where they fit: on a GPU the actions go to the device
        # and back around the push's launch, 8 times fewer bytes than int64's.
        space = env.single_action_space
        self._action_bytes = (
            isinstance(space, gymnasium.spaces.Discrete)
            and space.start >= 0
            and space.start + space.n <= 256
        )

    def set_world_values(self, values: np.ndarray) -> None:
        """The per-world values the task's observation reads ((num_envs,
        task.n_world_values) float64: the Levels' goals), copied to the device (a launch):
        after the env changed them."""
        self._world_values.from_numpy(np.ascontiguousarray(values, np.float64))

    @staticmethod
    def usable(env: "Fx2DVectorEnv") -> bool:
        """Whether `env` can take its steps so (module docstring)."""
        return (
            isinstance(env.scene, fx.Scene)
            and not env.randomization
            and runtime.backend_name() in _WIDE_ARCHS
        )

    def push(self, actions: np.ndarray) -> None:
        """Add each world's push (`actions` as _check_actions returns them) to its applied
        force for the next step, or set its motor targets (a task that drives): one
        launch."""
        if self._action_bytes:
            actions = actions.astype(np.uint8)

        def launch(ctx):
            pool = ctx.pool
            _push(
                self.task,
                pool.bodies,
                pool.joints,
                ctx.serial,
                actions,
                ctx.n_worlds,
                ctx.n_bodies,
                ctx.n_joints,
            )
            if not self.task.drives:
                ctx.cache.forces_on_device = True  # (the step clears them, as apply_force's)

        self.env.scene._on_device(launch)

    def observe(self, restart: np.ndarray | None = None) -> np.ndarray:
        """(num_envs, m) float32: every world's observation, after the worlds flagged in
        `restart` ((num_envs,) bool, or None: none) started over from new draws of their
        streams (a task that restarts on the host: as the env's _reset_worlds writes them,
        before the launch); the task's extra columns, if any, go to the env's
        _take_device_extras. One launch."""
        env = self.env
        n = env.num_envs
        if restart is not None and self.task.restarts_on_host:
            env._reset_worlds(restart)  # (the host's writes: a new level)
            restart = None
        worlds = np.zeros(0, np.int64) if restart is None else np.flatnonzero(restart)
        flags = restart.view(np.uint8) if len(worlds) else self._no_world
        streams = env._streams
        if len(worlds) and self._streams_version != streams.version:
            self._keys.from_numpy(streams.keys)
            self._counts.from_numpy(streams.counts)
            self._streams_version = streams.version
        m = self._n_columns
        out = np.empty((n, m + self.task.n_extra), np.float32)

        def launch(ctx):
            listed, n_listed, stepped = ctx.pool.manifolds, 0, True  # (none read)
            if self.task.touch_bodies:
                listed, n_listed, stepped = readout.listed_pairs(ctx)
            _restart_and_observe(
                self.task,
                ctx.pool.model,
                ctx.pool.bodies,
                ctx.pool.joints,
                ctx.pool.manifolds,
                listed,
                not stepped,
                ctx.serial,
                flags,
                self._keys,
                self._counts,
                self._built,
                self._targets,
                self._spec,
                self._scales,
                ctx.n_bodies,
                ctx.n_joints,
                ctx.n_pairs,
                n_listed,
                self._world_values,
                out,
            )

        env.scene._on_device(launch, reset=worlds)
        streams.skip(worlds, self.task.n_draws)
        if self.task.n_extra:
            env._take_device_extras(out[:, m:])
            return out[:, :m]
        return out
