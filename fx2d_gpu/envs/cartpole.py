"""fx2d/CartPole-v0: Gymnasium's cart-pole, simulated by the engine.

A cart slides on a prismatic joint along a static track (travel limited to +-3 m); a pole,
a uniform 1 m rod of 0.1 kg, hangs on a revolute joint at the cart's centre. Each step pushes
the cart left or right with 10 N (apply_force on the cart, one force per world). The task is
Gymnasium's CartPole-v1 (masses, lengths, force, tau = 0.02 s, thresholds, the initial noise
and the observation's sign conventions), but the motion is the engine's: rigid bodies and
joints solved by XPBD substeps, not the closed-form equations of motion.
"""

import math

import numpy as np
import taichi as ti
from gymnasium import spaces

from .base import AutoresetMode, Fx2DEnv, Fx2DVectorEnv
from .device_step import DeviceStep, DeviceTask

__all__ = ["CartPoleEnv", "CartPoleVectorEnv"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


class CartPoleVectorEnv(Fx2DVectorEnv):
    """Cart-poles, one per world of one scene: `gymnasium.make_vec("fx2d/CartPole-v0", ...)`.

    Observation (float32, (4,)), in Gymnasium's CartPole conventions: cart position x (m,
    along the track, 0 at its centre), cart velocity (m/s), pole angle from upright (rad,
    positive leaning towards +x, i.e. clockwise), pole angular velocity (rad/s, clockwise
    positive). Action: Discrete(2), 0 pushes the cart towards -x and 1 towards +x with
    `force_magnitude` N; with continuous=True a Box(-1, 1, (1,)) scaling that force.
    Reward 1 for every step, the last one included. Terminated when |angle| > 12 degrees or
    |x| > 2.4 m; truncated after max_episode_steps (500). Each episode starts with all four
    observation values uniform in [-0.05, 0.05].

    Domain randomisation (randomize=True or a dict of ranges): "mass_scale" (cart and
    pole masses times a factor each, default (0.8, 1.25)) and "gravity" (magnitude, m/s^2,
    default (8.8, 10.8)), drawn per world at each of its resets.

    Args:
        num_envs: the number of cart-poles (worlds), >= 1.
        continuous: False: Discrete(2) actions; True: Box(-1, 1, (1,)).
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
        device_step (bool): True: each world's push, restart and observation worked out on
            the device (envs/device_step.py) where the env can (a Scene in this process, no
            randomisation, the CPU or CUDA backend); False: in NumPy on the host. The same
            numbers either way.

    Attributes:
        continuous (bool): whether actions are a Box.
        track, cart, pole (int): the body indices.
        slider, hinge (int): the joint indices (cart on the track, pole on the cart).
    """

    dt = 0.02  # Gymnasium's tau
    nominal_gravity = (0.0, -9.8)
    randomization_defaults = {"mass_scale": (0.8, 1.25), "gravity": (8.8, 10.8)}
    n_state_draws = 4
    render_bounds = (-3.0, -1.0, 3.0, 2.2)

    #: N: the push of one step.
    force_magnitude = 10.0
    #: m: |x| beyond it terminates.
    x_threshold = 2.4
    #: rad: |angle| beyond it terminates (12 degrees).
    theta_threshold = 12 * 2 * math.pi / 360
    #: kg, kg, m: the cart's and the pole's masses, the pole's full length.
    cart_mass, pole_mass, pole_length = 1.0, 0.1, 1.0
    #: m: the track's travel limits (past the termination threshold, so that they never
    #: act in an episode; they keep a cart that is not reset on the track).
    travel_limit = 3.0

    def __init__(
        self,
        num_envs: int = 1,
        *,
        continuous: bool = False,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = 500,
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
        self.continuous = continuous
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
        self._forces = np.zeros((self.num_envs, 2))
        # The observation's four values, in Gymnasium's signs (the pole's angle and spin
        # clockwise), gathered as the columns of one array by one kernel (Scene.get_columns):
        # the only array a step's observation moves (on a GPU: to the device and back),
        # where the cart's and the pole's whole state moved three times its bytes in five.
        self._columns = (
            (self.cart, "x"),
            (self.cart, "vx"),
            (self.pole, "angle", -1.0),
            (self.pole, "angular_velocity", -1.0),
        )
        if device_step and DeviceStep.usable(self):
            task = _CartPoleOnDevice.of(
                pushed_body=self.cart,
                n_draws=self.n_state_draws,
                cart=self.cart,
                pole=self.pole,
                continuous=self.continuous,
                force_magnitude=self.force_magnitude,
                half_length=self.pole_length / 2,
            )
            self._device = DeviceStep(self, task, self._columns)

    def _build_scene(self):
        scene = self.scene
        # The track is the slider's static parent, below the cart. It collides with nothing
        # (mask_bits 0), as in Gymnasium's cart-pole, whose pole may swing through it: then no
        # two bodies may touch (the cart and the pole are jointed), and the scene steps
        # without the contact stages, which the process then never compiles
        # (StepOptions.contactless_step).
        self.track = scene.add_box(
            (0.0, -0.3), (2 * self.travel_limit + 0.5, 0.05), mass=0, mask_bits=0, name="track"
        )
        self.cart = scene.add_box((0.0, 0.0), (0.5, 0.3), mass=self.cart_mass, name="cart")
        # A thin box: its inertia about the hinge, m (L^2 + w^2) / 12 + m (L/2)^2, is within
        # 0.1 % of the uniform rod's m L^2 / 3 that Gymnasium's equations assume.
        self.pole = scene.add_box(
            (0.0, self.pole_length / 2), (0.06, self.pole_length), mass=self.pole_mass, name="pole"
        )
        self.slider = scene.add_prismatic_joint(
            self.track,
            self.cart,
            axis=(1.0, 0.0),
            position_min=-self.travel_limit,
            position_max=self.travel_limit,
            name="slider",
        )
        self.hinge = scene.add_revolute_joint(self.cart, self.pole, anchor=(0.0, 0.0), name="hinge")

    def _make_spaces(self):
        high = np.array(
            [2 * self.x_threshold, _FLOAT32_MAX, 2 * self.theta_threshold, _FLOAT32_MAX], np.float32
        )
        observation_space = spaces.Box(-high, high, dtype=np.float32)
        if self.continuous:
            return observation_space, spaces.Box(-1.0, 1.0, (1,), np.float32)
        return observation_space, spaces.Discrete(2)

    def _initial_states(self, draws):
        # Gymnasium's: x, x_dot, theta, theta_dot each uniform in [-0.05, 0.05].
        x, x_dot, theta, theta_dot = (-0.05 + 0.1 * draws).T
        state = self._rows(len(draws))
        state.position[:, self.cart, 0] = x
        state.velocity[:, self.cart, 0] = x_dot
        half = self.pole_length / 2
        # theta is clockwise (Gymnasium's); the engine's angles are counter-clockwise.
        state.angle[:, self.pole] = -theta
        state.angular_velocity[:, self.pole] = -theta_dot
        state.position[:, self.pole, 0] = x + half * np.sin(theta)
        state.position[:, self.pole, 1] = half * np.cos(theta)
        # The pole's centre moves with the cart plus its turn about the hinge.
        state.velocity[:, self.pole, 0] = x_dot + theta_dot * half * np.cos(theta)
        state.velocity[:, self.pole, 1] = -theta_dot * half * np.sin(theta)
        return state

    def _apply_actions(self, actions, active):
        if self.continuous:
            push = actions[:, 0]
        else:
            push = 2.0 * actions - 1.0  # 0 -> -1, 1 -> +1
        self._forces[:, 0] = np.where(active, self.force_magnitude * push, 0.0)
        self.scene.apply_force(self.cart, self._forces)

    def _observe(self):
        return self.scene.get_columns(self._columns, dtype=np.float32)

    def _score(self, observations, actions, active):
        terminated = (np.abs(observations[:, 0]) > self.x_threshold) | (
            np.abs(observations[:, 2]) > self.theta_threshold
        )
        return np.ones(self.num_envs), terminated


class _CartPoleOnDevice(DeviceTask):
    """A cart-pole's push and initial rows on the device (envs/device_step.py): the
    arithmetic of CartPoleVectorEnv._apply_actions and _initial_states, in the same order
    and in float64 (constants as ti.f64: a bare literal is a float32 in a kernel), stored
    in float32 as the host's path stores them. Attributes: cart, pole (body indices),
    continuous, force_magnitude (N), half_length (m)."""

    @staticmethod
    @ti.func
    def push(task: ti.template(), actions: ti.template(), bodies: ti.template(), world):
        push = ti.f64(0.0)
        if ti.static(task.continuous):
            push = ti.cast(actions[world, 0], ti.f64)
        else:
            push = ti.f64(2.0) * ti.cast(actions[world], ti.f64) - ti.f64(1.0)
        force = ti.cast(ti.f64(task.force_magnitude) * push, ti.f32)
        return ti.Vector([force, 0.0, 0.0], dt=ti.f32)

    @staticmethod
    @ti.func
    def initial_row(task: ti.template(), draws, body, row):
        start = ti.f64(-0.05) + ti.f64(0.1) * draws
        x, x_dot, theta, theta_dot = start[0], start[1], start[2], start[3]
        half = ti.f64(task.half_length)
        if body == task.cart:
            row[0] = ti.cast(x, ti.f32)
            row[3] = ti.cast(x_dot, ti.f32)
        elif body == task.pole:
            row[2] = ti.cast(-theta, ti.f32)
            row[5] = ti.cast(-theta_dot, ti.f32)
            row[0] = ti.cast(x + half * ti.sin(theta), ti.f32)
            row[1] = ti.cast(half * ti.cos(theta), ti.f32)
            row[3] = ti.cast(x_dot + theta_dot * half * ti.cos(theta), ti.f32)
            row[4] = ti.cast(-theta_dot * half * ti.sin(theta), ti.f32)
        return row


class CartPoleEnv(Fx2DEnv):
    """One cart-pole: `gymnasium.make("fx2d/CartPole-v0")`. See CartPoleVectorEnv.

    Args:
        render_mode: None or "rgb_array".
        continuous: False: Discrete(2) actions; True: Box(-1, 1, (1,)).
        randomize (bool | dict): domain randomisation (see CartPoleVectorEnv).
        render_size (tuple[int, int]): (width, height) of render()'s image, pixels.
        arch: the Taichi backend (see fx2d_gpu.Scene).
        substeps: XPBD substeps per step, >= 1.
        device_step (bool): see CartPoleVectorEnv.
    """

    vector_class = CartPoleVectorEnv

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        continuous: bool = False,
        randomize=False,
        render_size=(600, 400),
        arch: str = "auto",
        substeps: int = 11,
        device_step: bool = True,
    ):
        super().__init__(
            render_mode,
            continuous=continuous,
            randomize=randomize,
            render_size=render_size,
            arch=arch,
            substeps=substeps,
            device_step=device_step,
        )
