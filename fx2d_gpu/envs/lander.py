"""fx2d/Lander-v0: a LunarLander-like task, simulated by the engine.

A hull (Gymnasium's LunarLander polygon, 5 kg) with two legs on revolute joints (angle
limits, a PD motor as their spring) falls towards a terrain chain (`add_chain`) with a flat
landing pad at x = 0, y = 0 between two flags. Thrusters are forces (apply_force with a
torque, one per world): a main engine along the hull's up axis and two side engines that push
sideways and turn the hull. A lidar of 8 rays from the hull (one batched `ray_cast` for every
world) sees the terrain. Leg contacts and the crash come from `scene.touching()`, read once
per step for every world, right after the step (before the worlds that ended restart).

Where it can (envs/device_step.py), a vector step's per-world work runs on the device
instead, the same numbers bit for bit: the engines' push from the actions and the hull's
angle, the restarts, and the observation (the hull's rows, the contact flags and the lidar,
each ray tested against its world's few bodies in turn: ray_casts.nearest_in_world).
"""

import math

import numpy as np
import taichi as ti
from gymnasium import spaces

from fx2d_gpu import shapes

from .base import AutoresetMode, Fx2DEnv, Fx2DVectorEnv, cast_lidar
from .device_step import DeviceStep, DeviceTask, clipped

__all__ = ["LanderEnv", "LanderVectorEnv", "terrain_points"]

#: LunarLander's hull outline, m (its pixels over its scale of 30 px/m).
HULL_VERTICES = np.array([(-14, 17), (-17, 0), (-17, -10), (17, -10), (17, 0), (14, 17)]) / 30
#: m: half the terrain's width (it spans x in [-HALF_WIDTH, HALF_WIDTH]), the pad's
#: half-width, and the height scale of the observation (LunarLander's W/2, H/2).
HALF_WIDTH, PAD_HALF_WIDTH, HALF_HEIGHT = 10.0, 2.0, 20.0 / 3.0


def terrain_points(seed: int | None, chunks: int = 11, max_height: float = 2.5) -> np.ndarray:
    """The terrain's points, (chunks, 2) m, left to right: LunarLander's heights (uniform,
    then averaged with their neighbours) with the pad flat at y = 0 for |x| <= PAD_HALF_WIDTH.

    Args:
        seed: the heights' seed; None: flat ground.
        chunks: the number of points, >= 5 and odd (the middle one is at x = 0).
        max_height: m, the highest a raw height may be.
    """
    x = np.linspace(-HALF_WIDTH, HALF_WIDTH, chunks)
    if seed is None:
        return np.stack([x, np.zeros(chunks)], axis=1)
    raw = np.random.default_rng(seed).uniform(0.0, max_height, chunks)
    pad = np.abs(x) <= PAD_HALF_WIDTH + 1e-9
    raw[pad] = 0.0
    padded = np.concatenate([raw[:1], raw, raw[-1:]])
    height = (padded[:-2] + padded[1:-1] + padded[2:]) / 3.0
    height[pad] = 0.0  # the pad stays flat after the smoothing
    return np.stack([x, height], axis=1)


class LanderVectorEnv(Fx2DVectorEnv):
    """Landers, one per world of one scene: `gymnasium.make_vec("fx2d/Lander-v0", ...)`.

    Observation (float32, (16,)), LunarLander's first eight then the lidar:

    | index | value |
    |---|---|
    | 0, 1 | hull position relative to the pad: x / 10 m, (y - rest height) / 6.67 m |
    | 2, 3 | hull velocity: vx / 5 m/s, vy / 7.5 m/s (LunarLander's scaling) |
    | 4 | hull angle, rad, wrapped to [-pi, pi) |
    | 5 | hull angular velocity times 0.4 s |
    | 6, 7 | left and right leg touching the ground (1.0 or 0.0) |
    | 8..15 | lidar: distance / 10 m of 8 rays fanned below the hull (1.0: nothing in range) |

    Values are clipped to the observation space's box ([-2.5, 2.5] for positions, [-10, 10]
    for speeds). Actions: Discrete(4): 0 nothing, 1 the left orientation engine (pushes
    towards the hull's -x, turns it counter-clockwise), 2 the main engine, 3 the right
    orientation engine; with continuous=True a Box(-1, 1, (2,)) as LunarLanderContinuous
    (main engine off below 0, 50 % to 100 % above; side engines beyond |0.5|).

    Reward (LunarLander's): the change of the shaping -100 |position| - 100 |velocity| -
    100 |angle| + 10 per leg touching, minus 0.3 per step of full main engine and 0.03 of
    side engine; -100 and terminated when the hull touches the ground (a crash) or the
    lander leaves the terrain (|x| >= 10 m) or flies away (2.5 above); +100 and terminated
    when it comes to rest on both legs (slower than 0.1 m/s and 0.1 rad/s for 0.5 s).
    Truncated after max_episode_steps (1000). Each episode starts 10 m above the pad with a
    velocity uniform in [-4, 4] m/s on each axis (LunarLander's random initial push).

    The terrain is the same in every world (the worlds share their bodies): random heights
    from `terrain_seed`, fixed for the scene, with the flat pad in the middle.

    Domain randomisation (randomize=True or a dict): "mass_scale" (hull and legs, default
    (0.8, 1.25)), "friction" (hull and legs, default (0.3, 1.0); the ground's is 1.0 and a
    pair takes the smaller) and "gravity" (magnitude, m/s^2, default (8.0, 12.0)).

    Args:
        num_envs: the number of landers (worlds), >= 1.
        continuous: False: Discrete(4) actions; True: Box(-1, 1, (2,)).
        terrain_seed: the terrain's heights (an int >= 0), or None for flat ground.
        autoreset_mode (AutoresetMode | str): see Fx2DVectorEnv.
        max_episode_steps (int | None): see Fx2DVectorEnv.
        randomize (bool | dict): see Fx2DVectorEnv, and the ranges above.
        render_mode (str | None): see Fx2DVectorEnv.
        render_size (tuple[int, int]): see Fx2DVectorEnv.
        render_tiles (int): see Fx2DVectorEnv.
        arch (str): see Fx2DVectorEnv.
        substeps (int): see Fx2DVectorEnv.
        shards (int | None): see Fx2DVectorEnv (worlds over Ray actors).
        shard_options (dict | None): see Fx2DVectorEnv.
        device_step (bool): True: each world's push, restart and observation (its lidar
            included) worked out on the device (envs/device_step.py) where the env can (a
            Scene in this process, no randomisation, the CPU or CUDA backend); False: in
            NumPy and the scene's queries on the host. The same numbers either way.

    Attributes:
        continuous (bool): whether actions are a Box.
        terrain_seed (int | None): the terrain's seed.
        terrain (np.ndarray): (11, 2) the terrain's points, m.
        ground (np.ndarray): the terrain links' body indices.
        hull, left_leg, right_leg (int): the lander's body indices.
        leg_joints (tuple[int, int]): the legs' revolute joints.
        rest_height (float): m, the hull's height above flat ground when it stands on its legs.
    """

    dt = 1.0 / 50.0  # LunarLander's FPS
    nominal_gravity = (0.0, -10.0)
    randomization_defaults = {
        "mass_scale": (0.8, 1.25),
        "friction": (0.3, 1.0),
        "gravity": (8.0, 12.0),
    }
    n_state_draws = 2
    render_bounds = (-HALF_WIDTH - 0.5, -1.5, HALF_WIDTH + 0.5, 14.5)

    #: N: the main engine's thrust (1.7 times the lander's weight).
    main_engine_force = 90.0
    #: N, m: a side engine's thrust and its height above the centre of mass (its lever).
    side_engine_force, side_engine_height = 12.0, 0.45
    #: kg: hull and each leg.
    hull_mass, leg_mass = 5.0, 0.1
    #: m: where an episode starts (hull, above the pad) and its speed range, m/s per axis.
    start_height, start_speed = 10.0, 4.0
    #: lidar: rays, range (m).
    n_rays, lidar_range = 8, 10.0
    #: At rest: below these speeds (m/s, rad/s), on both legs, for this many steps.
    rest_speed, rest_spin, rest_steps = 0.1, 0.1, 25

    def __init__(
        self,
        num_envs: int = 1,
        *,
        continuous: bool = False,
        terrain_seed: int | None = 0,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = 1000,
        randomize=False,
        render_mode: str | None = None,
        render_size=(600, 400),
        render_tiles: int = 4,
        arch: str = "auto",
        substeps: int = 11,
        shards: int | None = None,
        shard_options: dict | None = None,
        device_step: bool = True,
    ):
        if not isinstance(continuous, bool):
            raise TypeError(f"continuous must be a bool, got {type(continuous).__name__}")
        if not isinstance(device_step, bool):
            raise TypeError(f"device_step must be a bool, got {type(device_step).__name__}")
        if terrain_seed is not None and (
            isinstance(terrain_seed, bool) or not isinstance(terrain_seed, int | np.integer)
        ):
            raise TypeError(
                f"terrain_seed must be an int or None, got {type(terrain_seed).__name__}"
            )
        if terrain_seed is not None and terrain_seed < 0:
            raise ValueError(f"terrain_seed must be >= 0, got {terrain_seed}")
        self.continuous = continuous
        self.terrain_seed = terrain_seed
        super().__init__(
            num_envs,
            autoreset_mode=autoreset_mode,
            max_episode_steps=max_episode_steps,
            randomize=randomize,
            render_mode=render_mode,
            render_size=render_size,
            render_tiles=render_tiles,
            arch=arch,
            substeps=substeps,
            shards=shards,
            shard_options=shard_options,
        )
        n = self.num_envs
        self._previous_shaping = np.zeros(n)
        self._steps_at_rest = np.zeros(n, np.int64)
        self._touching = np.zeros((n, self.scene.n_bodies), bool)
        self._forces = np.zeros((n, 2))
        self._torques = np.zeros(n)
        fan = np.linspace(-math.pi, 0.0, self.n_rays)  # hull frame: left, down, right
        self._ray_directions = np.stack([np.cos(fan), np.sin(fan)], axis=1)
        self._rays = None  # the last lidar: (starts, ends, hit), for render()
        if device_step and DeviceStep.usable(self):
            self._device = DeviceStep(self, self._device_task())

    # ------------------------------------------------------------------ the scene
    def _build_scene(self):
        scene = self.scene
        self.terrain = terrain_points(self.terrain_seed)
        first = scene.add_chain(
            (0.0, 0.0), self.terrain, static_friction=1.0, dynamic_friction=1.0, name="ground"
        )
        self.ground = np.arange(first, first + len(self.terrain) - 1)

        _, centroid = shapes.polygon(HULL_VERTICES)
        # The hull's outline origin at start_height; its body sits at its centroid.
        origin = np.array([0.0, self.start_height])
        # Legs: LunarLander's 0.13 x 0.53 m boxes, hung from the hull's lower corners and
        # splayed outwards by 0.45 rad.
        leg_size, splay = np.array([4.0, 16.0]) / 30, 0.45
        lander = {"collision_group": -1}  # hull and legs never collide with each other
        self.hull = scene.add_polygon(
            origin + centroid,
            HULL_VERTICES,
            mass=self.hull_mass,
            static_friction=0.5,
            dynamic_friction=0.5,
            name="hull",
            **lander,
        )
        legs, joints, corners = [], [], [HULL_VERTICES - centroid]
        for side in (-1.0, 1.0):
            top = np.array([side * 0.4, -0.2])  # in the outline's frame
            down = np.array([side * math.sin(splay), -math.cos(splay)])
            centre = top + 0.5 * leg_size[1] * down
            angle = side * splay
            leg = scene.add_box(
                origin + centre,
                leg_size,
                angle=angle,
                mass=self.leg_mass,
                static_friction=0.8,
                dynamic_friction=0.6,
                **lander,
            )
            # A stiff PD spring holds the leg at its splay; landing bends it within +-0.3 rad.
            joints.append(
                scene.add_revolute_joint(
                    self.hull,
                    leg,
                    anchor=top - centroid,
                    angle_min=-0.3,
                    angle_max=0.3,
                    control_mode="position",
                    pid=(40.0, 0.0, 1.0),
                    max_effort=40.0,
                )
            )
            legs.append(leg)
            cos, sin = math.cos(angle), math.sin(angle)
            box = (np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * leg_size / 2) @ np.array(
                [[cos, sin], [-sin, cos]]
            )
            corners.append(box + centre - centroid)
        self.left_leg, self.right_leg = legs
        self.leg_joints = tuple(joints)
        corners = np.concatenate(corners)
        # Height of the hull's centre of mass above flat ground, standing on its legs.
        self.rest_height = float(-corners[:, 1].min())
        # The lidar starts outside the lander (else its rays would hit the hull or a leg):
        # its rays begin this far from the hull's centre, m.
        self.lidar_start = float(np.linalg.norm(corners, axis=1).max()) + 0.1
        for x in (-PAD_HALF_WIDTH, PAD_HALF_WIDTH):  # the pad's flags: drawn, never touched
            scene.add_shape((x, 0.4), shapes.box((0.05, 0.8)), collides=False, mass=0)

    def _make_spaces(self):
        low = np.array(
            [-2.5, -2.5, -10.0, -10.0, -math.pi, -10.0, 0.0, 0.0] + [0.0] * self.n_rays, np.float32
        )
        high = np.array(
            [2.5, 2.5, 10.0, 10.0, math.pi, 10.0, 1.0, 1.0] + [1.0] * self.n_rays, np.float32
        )
        observation_space = spaces.Box(low, high, dtype=np.float32)
        if self.continuous:
            return observation_space, spaces.Box(-1.0, 1.0, (2,), np.float32)
        return observation_space, spaces.Discrete(4)

    def mass_bodies(self):
        """The bodies "mass_scale" randomises: the hull and its legs."""
        return [self.hull, self.left_leg, self.right_leg]

    def _initial_states(self, draws):
        state = self._rows(len(draws))
        speed = self.start_speed * (2.0 * draws - 1.0)  # (k, 2) m/s
        for body in self.mass_bodies():  # the lander moves as one rigid body
            state.velocity[:, body] = speed
        return state

    def _place_worlds(self, worlds, draws):
        super()._place_worlds(worlds, draws)
        # A lander starts start_height (10 m) up, over terrain of at most 2.5 m: touching
        # nothing.
        self._touching[worlds] = False

    # ------------------------------------------------------------------ a step
    def _engines(self, actions):
        """(main engine power (n,), side engine power (n,), side (n,): -1 left, +1 right)."""
        if self.continuous:
            main = np.where(actions[:, 0] > 0.0, (np.clip(actions[:, 0], 0.0, 1.0) + 1) / 2, 0.0)
            lateral = actions[:, 1]
            firing = np.abs(lateral) > 0.5
            side_power = np.where(firing, np.clip(np.abs(lateral), 0.5, 1.0), 0.0)
            side = np.sign(lateral)
        else:
            main = (actions == 2).astype(np.float64)
            side = np.where(actions == 1, -1.0, np.where(actions == 3, 1.0, 0.0))
            side_power = np.abs(side)
        return main, side_power, side

    def _apply_actions(self, actions, active):
        main, side_power, side = self._engines(actions)
        main, side_power = main * active, side_power * active
        # (_LanderOnDevice.push: the same arithmetic, a world a thread)
        angle = self._hull_angle  # read by the last _observe(): nothing moved since
        up = np.stack([-np.sin(angle), np.cos(angle)], axis=1)
        right = np.stack([np.cos(angle), np.sin(angle)], axis=1)
        self._forces[:] = (
            self.main_engine_force * main[:, None] * up
            + self.side_engine_force * (side_power * side)[:, None] * right
        )
        # A side engine sits above the centre of mass: its push also turns the hull.
        self._torques[:] = -side * side_power * self.side_engine_force * self.side_engine_height
        self.scene.apply_force(self.hull, self._forces, self._torques)

    def _read_after_step(self):
        # Which bodies touch something after the step, every world's, one launch: read
        # before the worlds that ended restart, whose writes would have the scene find
        # every world's contacts again at its poses (a broad and a narrow phase) for the
        # observation; a restarted world's flags are cleared by _place_worlds. (The
        # device's path reads them in its observation's launch.)
        if self._device is None:
            self._touching = self.scene.touching()

    def _lidar(self, position, angle):
        """base.cast_lidar of every world's hull at `position` ((n, 2) m) and `angle` ((n,)
        rad)."""
        return cast_lidar(
            self.scene, position, angle, self._ray_directions, self.lidar_start, self.lidar_range
        )

    def _observe(self):
        hull = self.scene.get_state(bodies=[self.hull])
        position, angle = hull.position[:, 0], hull.angle[:, 0]
        self._hull_angle = angle
        velocity, spin = hull.velocity[:, 0], hull.angular_velocity[:, 0]
        origins, directions, reach, hit = self._lidar(position, angle)
        self._rays = (origins, origins + reach[..., None] * directions, hit)

        observations = np.empty((self.num_envs, 8 + self.n_rays), np.float64)
        observations[:, 0] = position[:, 0] / HALF_WIDTH
        observations[:, 1] = (position[:, 1] - self.rest_height) / HALF_HEIGHT
        observations[:, 2] = velocity[:, 0] * HALF_WIDTH / 50.0  # LunarLander's, FPS 50
        observations[:, 3] = velocity[:, 1] * HALF_HEIGHT / 50.0
        observations[:, 4] = (angle + math.pi) % (2 * math.pi) - math.pi
        observations[:, 5] = 20.0 * spin / 50.0
        observations[:, 6] = self._touching[:, self.left_leg]
        observations[:, 7] = self._touching[:, self.right_leg]
        observations[:, 8:] = reach / self.lidar_range
        self._note_hull(position, velocity, spin, self._touching[:, self.hull])
        space = self.single_observation_space
        return np.clip(observations, space.low, space.high).astype(np.float32)

    def _note_hull(self, position, velocity, spin, hull_touching):
        """Keep what _score reads besides the observation: every world's hull after the
        step, position (n, 2) m, velocity (n, 2) m/s and spin (n,) rad/s (float64 of the
        scene's float32), and whether it touches something ((n,) bool)."""
        self._speed = np.hypot(velocity[:, 0], velocity[:, 1])
        self._spin = np.abs(spin)
        # (|x| / HALF_WIDTH and the height as the observation's columns 0 and 1, unclipped)
        self._out = (np.abs(position[:, 0] / HALF_WIDTH) >= 1.0) | (
            (position[:, 1] - self.rest_height) / HALF_HEIGHT >= 2.5
        )
        self._hull_touching = hull_touching

    def _take_device_extras(self, extras):
        # _LanderOnDevice's extra columns: the hull's x, y, vx, vy, spin and touch flag.
        values = extras.astype(np.float64)
        self._note_hull(values[:, 0:2], values[:, 2:4], values[:, 4], extras[:, 5] > 0.5)
        self._rays = None  # (cast again if render() asks: _render_rays)

    def _shaping(self, observations):
        o = observations.astype(np.float64)
        return (
            -100.0 * np.hypot(o[:, 0], o[:, 1])
            - 100.0 * np.hypot(o[:, 2], o[:, 3])
            - 100.0 * np.abs(o[:, 4])
            + 10.0 * o[:, 6]
            + 10.0 * o[:, 7]
        )

    def _start_episodes(self, worlds, observations):
        self._previous_shaping[worlds] = self._shaping(observations)[worlds]
        self._steps_at_rest[worlds] = 0

    def _score(self, observations, actions, active):
        main, side_power, _ = self._engines(actions)
        fuel = 0.30 * (main * active) + 0.03 * (side_power * active)
        shaping = self._shaping(observations)
        rewards = shaping - self._previous_shaping - fuel
        self._previous_shaping = shaping
        # (the legs' touch flags: the observation's columns 6 and 7, 1.0 or 0.0)
        on_legs = (observations[:, 6] == 1.0) & (observations[:, 7] == 1.0)
        still = on_legs & (self._speed < self.rest_speed) & (self._spin < self.rest_spin)
        self._steps_at_rest = np.where(still, self._steps_at_rest + 1, 0)
        landed = self._steps_at_rest >= self.rest_steps
        crashed = self._hull_touching | self._out
        rewards = np.where(crashed, -100.0, np.where(landed, 100.0, rewards))
        return rewards, crashed | landed

    def _render_rays(self):
        if self._rays is None:  # the device's path: the last observation's lidar, again
            hull = self.scene.get_state(bodies=[self.hull])
            origins, directions, reach, hit = self._lidar(hull.position[:, 0], hull.angle[:, 0])
            self._rays = (origins, origins + reach[..., None] * directions, hit)
        return self._rays

    def _device_task(self) -> "_LanderOnDevice":
        """This env's _LanderOnDevice: its bodies, engines, lidar and observation bounds."""
        space = self.single_observation_space
        rays = 8 + np.arange(self.n_rays)
        # (one bound for every ray's column: _LanderOnDevice.observe clips them alike)
        assert (space.low[rays] == space.low[8]).all() and (space.high[rays] == space.high[8]).all()
        n_observed = space.shape[0]
        return _LanderOnDevice.of(
            pushed_body=self.hull,
            n_draws=self.n_state_draws,
            touch_bodies=(self.left_leg, self.right_leg, self.hull),
            touch_columns=(6, 7, n_observed + 5),
            observes=True,
            n_observed=n_observed,
            n_extra=6,
            n_bodies=self.scene.n_bodies,
            hull=self.hull,
            left_leg=self.left_leg,
            right_leg=self.right_leg,
            continuous=self.continuous,
            main_engine_force=self.main_engine_force,
            side_engine_force=self.side_engine_force,
            side_engine_height=self.side_engine_height,
            start_speed=self.start_speed,
            rest_height=self.rest_height,
            lidar_start=self.lidar_start,
            lidar_range=self.lidar_range,
            n_rays=self.n_rays,
            observed_body=self.hull,
            lidar_column=8,
            ray_x=tuple(float(x) for x in self._ray_directions[:, 0]),
            ray_y=tuple(float(y) for y in self._ray_directions[:, 1]),
            low=tuple(float(v) for v in space.low),
            high=tuple(float(v) for v in space.high),
        )


@ti.func
def _remainder(a, b):
    """NumPy's remainder (a % b, the sign of b) of a float64 `a` by b > 0, bit for bit: C's
    fmod (exact), moved into b's sign. fmod by exact steps: each takes off the largest
    b * 2**k not above what is left, a subtraction without rounding (Sterbenz: between
    half and all of it). A non-finite `a` gives NaN, as NumPy's."""
    left = ti.abs(a)
    if left - left != 0.0:  # inf or NaN
        left = ti.math.nan
    while left >= b:
        chunk = b
        while chunk * 2.0 <= left:
            chunk *= 2.0
        left -= chunk
    mod = -left if a < 0.0 else left
    if mod != 0.0:
        if mod < 0.0:
            mod += b
    else:
        mod = ti.f64(0.0)
    return mod


class _LanderOnDevice(DeviceTask):
    """A lander's push, initial rows and observation on the device (envs/device_step.py):
    the arithmetic of LanderVectorEnv._engines and _apply_actions, _initial_states and
    _observe, in the same order and in float64 (constants as ti.f64), stored in float32
    as the host's path stores them. The lidar (device_step.lidar_reach, a thread a ray)
    starts lidar_start beyond the hull's outline; observe writes the hull's columns and
    the extras (its x, y, vx, vy, spin; then its touch flag, marked by the launch:
    LanderVectorEnv._take_device_extras)."""

    @staticmethod
    @ti.func
    def push(task: ti.template(), actions: ti.template(), bodies: ti.template(), world):
        main, side_power, side = ti.f64(0.0), ti.f64(0.0), ti.f64(0.0)
        if ti.static(task.continuous):
            throttle = ti.cast(actions[world, 0], ti.f64)
            if throttle > 0.0:
                main = (ti.min(ti.max(throttle, ti.f64(0.0)), ti.f64(1.0)) + ti.f64(1.0)) / ti.f64(
                    2.0
                )
            lateral = ti.cast(actions[world, 1], ti.f64)
            if ti.abs(lateral) > 0.5:
                side_power = ti.min(ti.max(ti.abs(lateral), ti.f64(0.5)), ti.f64(1.0))
            if lateral > 0.0:
                side = ti.f64(1.0)
            elif lateral < 0.0:
                side = ti.f64(-1.0)
        else:
            action = actions[world]
            if action == 2:
                main = ti.f64(1.0)
            if action == 1:
                side = ti.f64(-1.0)
            elif action == 3:
                side = ti.f64(1.0)
            side_power = ti.abs(side)
        angle = ti.cast(bodies.angle[world * task.n_bodies + task.hull], ti.f64)
        c, s = ti.cos(angle), ti.sin(angle)
        thrust = ti.f64(task.main_engine_force) * main
        lateral_thrust = ti.f64(task.side_engine_force) * (side_power * side)
        force_x = thrust * -s + lateral_thrust * c  # up (-sin, cos), right (cos, sin)
        force_y = thrust * c + lateral_thrust * s
        torque = (
            -side * side_power * ti.f64(task.side_engine_force) * ti.f64(task.side_engine_height)
        )
        return ti.Vector(
            [ti.cast(force_x, ti.f32), ti.cast(force_y, ti.f32), ti.cast(torque, ti.f32)]
        )

    @staticmethod
    @ti.func
    def initial_row(task: ti.template(), draws, body, row):
        if body == task.hull or body == task.left_leg or body == task.right_leg:
            speed = ti.f64(task.start_speed) * (ti.f64(2.0) * draws - ti.f64(1.0))
            row[3] = ti.cast(speed[0], ti.f32)
            row[4] = ti.cast(speed[1], ti.f32)
        return row

    @staticmethod
    @ti.func
    def observe(
        task: ti.template(),
        bodies: ti.template(),
        world,
        slot,
        x,
        y,
        angle,
        world_values: ti.template(),
        out: ti.template(),
    ):
        velocity = bodies.velocity[slot]
        spin = bodies.angular_velocity[slot]
        vx, vy = ti.cast(velocity.x, ti.f64), ti.cast(velocity.y, ti.f64)
        w = ti.cast(spin, ti.f64)
        out[world, 0] = clipped(x / ti.f64(HALF_WIDTH), task, 0)
        out[world, 1] = clipped((y - ti.f64(task.rest_height)) / ti.f64(HALF_HEIGHT), task, 1)
        out[world, 2] = clipped(vx * ti.f64(HALF_WIDTH) / ti.f64(50.0), task, 2)
        out[world, 3] = clipped(vy * ti.f64(HALF_HEIGHT) / ti.f64(50.0), task, 3)
        wrapped = _remainder(angle + ti.f64(math.pi), ti.f64(2 * math.pi)) - ti.f64(math.pi)
        out[world, 4] = clipped(wrapped, task, 4)
        out[world, 5] = clipped(ti.f64(20.0) * w / ti.f64(50.0), task, 5)
        extras = task.n_observed
        out[world, extras + 0] = bodies.position[slot].x
        out[world, extras + 1] = bodies.position[slot].y
        out[world, extras + 2] = velocity.x
        out[world, extras + 3] = velocity.y
        out[world, extras + 4] = spin


class LanderEnv(Fx2DEnv):
    """One lander: `gymnasium.make("fx2d/Lander-v0")`. See LanderVectorEnv.

    Args:
        render_mode: None or "rgb_array".
        continuous: False: Discrete(4) actions; True: Box(-1, 1, (2,)).
        terrain_seed: the terrain's heights (an int >= 0), or None for flat ground.
        randomize (bool | dict): domain randomisation (see LanderVectorEnv).
        render_size (tuple[int, int]): (width, height) of render()'s image, pixels.
        arch: the Taichi backend (see fx2d_gpu.Scene).
        substeps: XPBD substeps per step, >= 1.
        device_step (bool): see LanderVectorEnv.
    """

    vector_class = LanderVectorEnv

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        continuous: bool = False,
        terrain_seed: int | None = 0,
        randomize=False,
        render_size=(600, 400),
        arch: str = "auto",
        substeps: int = 11,
        device_step: bool = True,
    ):
        super().__init__(
            render_mode,
            continuous=continuous,
            terrain_seed=terrain_seed,
            randomize=randomize,
            render_size=render_size,
            arch=arch,
            substeps=substeps,
            device_step=device_step,
        )
