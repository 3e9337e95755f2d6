"""The base vector environment: every sub-environment is a world of ONE fx2d_gpu Scene.

`Fx2DVectorEnv` implements `gymnasium.vector.VectorEnv` over `Scene(n_worlds=num_envs)`: one
`scene.step(dt)` advances every sub-environment, actions go in per world (apply_force with
`(n_worlds, 2)` forces, joint targets `(n_worlds,)`), and finished worlds are reset with
`scene.reset_worlds(mask, state)`, their initial states drawn per world. `Fx2DEnv` is the
one-world `gymnasium.Env` over the same code (a vector env of one world), so that world w of a
vector env seeded s and the one-world env seeded s + w run the same episode.

Randomness: each sub-environment draws from its own counter-based stream (SplitMix64, see
`WorldStreams`), so the draws of every world being reset are made at once in NumPy, and a
world's draws depend only on its own seed and how many it has drawn, never on num_envs.
"""

from __future__ import annotations

import abc
import math
import multiprocessing
import os
import sys
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.utils import batch_space

import fx2d_gpu as fx

from ..device import runtime
from ..draw import render as fx_render

__all__ = ["AutoresetMode", "Fx2DEnv", "Fx2DVectorEnv", "WorldStreams", "parse_randomize"]

#: Why an env refuses a forked process, and the fix.
FORK_REFUSAL = (
    "fx2d_gpu's environments cannot run in processes forked after Taichi started (its "
    "thread pool does not survive a fork: the first step would hang). Gymnasium's async "
    "vector env builds one env in the parent, starting Taichi, then forks with Linux's "
    "default start method: use vector_kwargs={'context': 'spawn'} (or 'forkserver'), e.g. "
    "gymnasium.make_vec(id, num_envs, vectorization_mode='async', "
    "vector_kwargs={'context': 'spawn'}); or vectorization_mode='vector_entry_point', "
    "every env a world of one scene"
)

#: Set in a child forked after Taichi started in its parent (see _note_fork).
_forked_after_taichi = False


def _note_fork():
    """In a forked child: remember whether Taichi was running in the parent."""
    global _forked_after_taichi
    _forked_after_taichi = _forked_after_taichi or runtime.backend_name() is not None


os.register_at_fork(after_in_child=_note_fork)


def _check_start_method():
    """Refuse, with the fix, an env built where it would hang: by an AsyncVectorEnv that
    will fork its workers (its constructor builds one env first, here, which starts
    Taichi), or in a process forked after Taichi started."""
    if _forked_after_taichi:
        raise RuntimeError(FORK_REFUSAL)
    frame = sys._getframe(1)
    while frame is not None:  # a few frames: the callers that built this env
        if frame.f_code.co_name == "__init__" and isinstance(
            frame.f_locals.get("self"), AsyncVectorEnv
        ):
            context = frame.f_locals.get("context")
            if multiprocessing.get_context(context).get_start_method() == "fork":
                raise ValueError(FORK_REFUSAL)
            return
        frame = frame.f_back


_UINT64 = np.uint64
#: SplitMix64's increment (2^64 / golden ratio) and its output function's shifts and
#: multipliers, for the host's streams (_mix64) and the device's (envs/device_step.py).
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
MIX_SHIFTS = (30, 27, 31)
MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
#: A draw's float64: its top 53 bits times 2^-53, uniform in [0, 1).
DRAW_SHIFT = 11
_GOLDEN_GAMMA = _UINT64(GOLDEN_GAMMA)


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on a uint64 array (arithmetic wraps modulo 2^64)."""
    z = (z ^ (z >> _UINT64(MIX_SHIFTS[0]))) * _UINT64(MIX_MULTIPLIERS[0])
    z = (z ^ (z >> _UINT64(MIX_SHIFTS[1]))) * _UINT64(MIX_MULTIPLIERS[1])
    return z ^ (z >> _UINT64(MIX_SHIFTS[2]))


class WorldStreams:
    """One random stream per world, drawn for many worlds at once without a Python loop.

    World w's stream is SplitMix64 started from a key that its seed gives (`seed(...)`): the
    n-th draw is mix(key + n * gamma). It depends on the world's seed and on how many values
    the world has drawn since, so a world of a vector env seeded s + w draws exactly what a
    one-world env seeded s + w draws. Unseeded worlds start from operating-system entropy.

    Args:
        n_worlds: the number of streams, >= 1.

    Attributes:
        keys: (n_worlds,) uint64, each stream's key.
        counts: (n_worlds,) uint64, the values each stream has drawn since its key was set.
        version: how many times the keys or counts were changed here (seed, uniform): a
            copy on the device (envs/device_step.py) is current while it matches.
    """

    def __init__(self, n_worlds: int):
        self.keys = np.random.SeedSequence().generate_state(n_worlds, np.uint64)
        self.counts = np.zeros(n_worlds, np.uint64)
        self.version = 0

    def seed(self, worlds: np.ndarray, seeds: np.ndarray) -> None:
        """Restart the streams of `worlds` from `seeds`.

        Args:
            worlds: (k,) int world indices.
            seeds: (k,) uint64, one per world.
        """
        self.keys[worlds] = _mix64(np.asarray(seeds, np.uint64))
        self.counts[worlds] = 0
        self.version += 1

    def uniform(self, worlds: np.ndarray, n_values: int) -> np.ndarray:
        """(k, n_values) float64 uniform in [0, 1): the next n_values of each of `worlds`.

        Args:
            worlds: (k,) int world indices (each at most once).
            n_values: how many values each world draws, >= 0.
        """
        steps = self.counts[worlds, None] + np.arange(1, n_values + 1, dtype=np.uint64)
        bits = _mix64(self.keys[worlds, None] + steps * _GOLDEN_GAMMA)
        self.counts[worlds] += _UINT64(n_values)
        self.version += 1
        return (bits >> _UINT64(DRAW_SHIFT)).astype(np.float64) * 2.0 ** -(64 - DRAW_SHIFT)

    def skip(self, worlds: np.ndarray, n_values: int) -> None:
        """Count n_values draws of each of `worlds` ((k,) indices) that a copy of these
        streams on the device made (the same numbers uniform would have given): the copy
        stays current."""
        self.counts[worlds] += _UINT64(n_values)


#: The domain randomisation every task may offer, in the order values are drawn: name ->
#: (what it scales or sets, the smallest lower bound allowed, the largest upper bound
#: allowed). The upper bounds keep every draw one the scene simulates, checked at
#: construction rather than failing at a reset: a mass factor of 1000 (a 1,000,000:1 mass
#: ratio between the task's bodies at the two ends), friction of 100, and 1000 m/s^2
#: (about 100 g; 1e30 would make every step a SimulationError).
RANDOMIZATION_KEYS = {
    "mass_scale": ("each dynamic body's mass, times a factor drawn per body", 1e-3, 1e3),
    "friction": ("static and dynamic friction of the task's moving bodies", 0.0, 100.0),
    "gravity": ("gravity's magnitude, m/s^2 (pointing down)", 0.0, 1000.0),
}


def parse_randomize(
    randomize, defaults: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """The domain randomisation ranges a task's `randomize=` argument asks for.

    Args:
        randomize (bool | dict | None): False or None (none), True (the task's
            `defaults`), or a dict naming some of the task's keys (those of `defaults`),
            each with a (low, high) range, or None to leave that quantity at its nominal
            value.
        defaults: the task's keys and default ranges (a subset of RANDOMIZATION_KEYS).

    Returns:
        {key: (low, high)} of floats, in RANDOMIZATION_KEYS' order; empty for none.

    Raises:
        TypeError: `randomize` is not a bool, None or dict, or a range is not two numbers.
        ValueError: an unknown key, low > high, a bound not finite, below the key's
            smallest allowed value (masses > 0, frictions and gravity >= 0) or above its
            largest (RANDOMIZATION_KEYS: mass_scale 1000, friction 100, gravity 1000 m/s^2),
            naming randomize and the key.
    """
    if randomize is None or randomize is False:
        return {}
    if randomize is True:
        chosen = dict(defaults)
    elif isinstance(randomize, dict):
        unknown = sorted(set(randomize) - set(defaults), key=str)
        if unknown:
            raise ValueError(
                f"randomize: unknown key(s) {unknown}; this task randomises {sorted(defaults)}"
            )
        chosen = {key: value for key, value in randomize.items() if value is not None}
    else:
        raise TypeError(
            f"randomize must be a bool, None or a dict of (low, high) ranges, "
            f"got {type(randomize).__name__}"
        )
    ranges = {}
    for key, (_, smallest, largest) in RANDOMIZATION_KEYS.items():
        if key not in chosen:
            continue
        value = chosen[key]
        try:
            low, high = (float(v) for v in value)
        except (TypeError, ValueError):
            raise TypeError(
                f"randomize[{key!r}] must be a (low, high) pair of numbers, got {value!r}"
            ) from None
        if (
            not (math.isfinite(low) and math.isfinite(high))
            or low > high
            or low < smallest
            or high > largest
        ):
            raise ValueError(
                f"randomize[{key!r}] must be finite with {smallest:g} <= low <= "
                f"high <= {largest:g}, got ({low}, {high})"
            )
        ranges[key] = (low, high)
    return ranges


def cast_lidar(scene, position, angle, directions, start: float, reach: float):
    """A lidar riding a body in every world (the Lander's hull, the Levels' chassis), cast
    with scene.ray_cast (the host's path; device_step.lidar_reach is the device's).

    Args:
        scene: the env's scene.
        position: (n, 2) float64 m, the body's position in each world.
        angle: (n,) float64 rad, its angle.
        directions: (rays, 2) float64, the rays' directions in the body's frame.
        start: m, how far from the body's position the rays start (beyond its outline).
        reach: m, the lidar's range.

    Returns:
        (origins (n, rays, 2) m, directions (n, rays, 2), distance (n, rays) m: the nearest
        hit's, or `reach` where a ray hits nothing, hit (n, rays) bool).
    """
    turn = np.stack([np.cos(angle), np.sin(angle)], axis=1)  # (n, 2)
    turned = np.stack(
        [
            turn[:, None, 0] * directions[:, 0] - turn[:, None, 1] * directions[:, 1],
            turn[:, None, 1] * directions[:, 0] + turn[:, None, 0] * directions[:, 1],
        ],
        axis=2,
    )  # (n, rays, 2)
    origins = position[:, None, :] + start * turned
    hits = scene.ray_cast(origins, turned, reach)
    return origins, turned, np.where(hits.hit, hits.distance, reach), hits.hit


def _autoreset_mode(value) -> AutoresetMode:
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        raise ValueError(
            f"autoreset_mode must be a gymnasium.vector.AutoresetMode or one of "
            f"{[m.value for m in AutoresetMode]}, got {value!r}"
        ) from None


def _count(value, name: str, *, allow_none: bool = False) -> int | None:
    """An int >= 1 (or None where allowed), else TypeError / ValueError naming `name`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(
            f"{name} must be an int{' or None' if allow_none else ''}, got {type(value).__name__}"
        )
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _render_size(value) -> tuple[int, int]:
    try:
        width, height = value
    except (TypeError, ValueError):
        raise TypeError(f"render_size must be (width, height) in pixels, got {value!r}") from None
    for v in (width, height):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"render_size must be two ints, got {value!r}")
    return fx_render.check_image_size((width, height), "render_size")


class Fx2DVectorEnv(gymnasium.vector.VectorEnv, metaclass=abc.ABCMeta):
    """A Gymnasium 1.x vector environment whose sub-environments are the worlds of one Scene.

    Subclasses (the tasks) build the scene and define spaces, initial states, actions,
    observations and rewards through the hooks below; this class does the rest: the three
    autoreset modes, reset masks, per-world seeding, episode lengths, domain randomisation
    (per-world masses, friction and gravity at each reset of a world) and rendering.

    Stepping: `step(actions)` applies every world's action, advances the whole scene by one
    `scene.step(dt)`, then reads every world's observation at once. Autoreset follows
    `metadata["autoreset_mode"]` as Gymnasium documents (https://farama.org/Vector-Autoreset-Mode):

    - NEXT_STEP (the default): a world that ended (terminated or truncated) is reset during
      the following step(), which ignores its action and returns its first observation,
      reward 0 and terminated = truncated = False.
    - SAME_STEP: a world that ends is reset in the same step(); the returned observation is
      its first one, and `infos["final_obs"]` (an object array (num_envs,), the last
      observation where `infos["_final_obs"]` is True, else None) and `infos["final_info"]`
      (with `infos["_final_info"]`) hold the end of the episode.
    - DISABLED: nothing is reset; step() raises RuntimeError while a world that ended has not
      been reset with `reset(options={"reset_mask": mask})`.

    Seeding: `reset(seed=s)` seeds world i with s + i (a list seeds each world); with a reset
    mask, only the masked worlds are seeded and reset, and the others are left bit for bit
    as they were. `reset()` without a seed continues each world's stream.

    Args:
        num_envs: the number of sub-environments (worlds), >= 1.
        autoreset_mode (AutoresetMode | str): a gymnasium.vector.AutoresetMode or its
            value ("NextStep", "SameStep", "Disabled").
        max_episode_steps: steps after which an episode is truncated; None: never.
        randomize (bool | dict): domain randomisation at each reset of a world: False,
            True (the task's default ranges, `randomization_defaults`) or {key: (low,
            high)} for some of the task's keys (see RANDOMIZATION_KEYS: "mass_scale",
            "friction", "gravity").
        render_mode: None or "rgb_array" (render() returns an image of the first worlds).
        render_size (tuple[int, int]): (width, height) of render()'s image, pixels.
        render_tiles: how many worlds render() draws, as a grid of tiles, >= 1.
        arch: the Taichi backend (see fx2d_gpu.Scene): "auto", "cpu", "cuda", ...
        substeps: the scene's XPBD substeps per step, >= 1.
        shards: None (one Scene in this process) or the number of Ray actors the worlds are
            split over (a fx2d_gpu.distributed.ShardedScene built from a one-world scene of
            the task; the `distributed` extra): the same episodes bit for bit, on a cluster.
        shard_options (dict | None): Ray actor options for each shard (e.g. {"num_gpus": 1});
            only with shards.

    Attributes:
        scene (fx2d_gpu.Scene | fx2d_gpu.distributed.ShardedScene): the scene; world i is
            sub-environment i.
        num_envs (int): the number of sub-environments.
        dt (float): seconds of simulated time per step().
        max_episode_steps (int | None): the truncation length.
        randomization (dict): the domain randomisation ranges in use ({} for none).
        episode_steps (np.ndarray): (num_envs,) int64, steps taken in each world's episode.
        autoreset_mode (AutoresetMode): as metadata["autoreset_mode"].
        render_size (tuple[int, int]): render()'s (width, height), pixels.
        render_tiles (int): the worlds render() draws.

    Raises:
        TypeError: an argument of the wrong type (named in the message).
        ValueError: an argument out of range (named in the message).
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 50}

    #: Seconds per step (tasks set their own).
    dt: float = 0.02
    #: Gravity (m/s^2) the scene is built with; domain randomisation changes its magnitude.
    nominal_gravity: tuple[float, float] = (0.0, -9.81)
    #: The domain randomisation `randomize=True` uses: key -> (low, high).
    randomization_defaults: dict[str, tuple[float, float]] = {}
    #: Uniform draws a world's initial state takes at each reset.
    n_state_draws: int = 0
    #: render()'s view: (xmin, ymin, xmax, ymax), m.
    render_bounds: tuple[float, float, float, float] = (-5.0, -5.0, 5.0, 5.0)

    def __init__(
        self,
        num_envs: int = 1,
        *,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        randomize=False,
        render_mode: str | None = None,
        render_size=(600, 400),
        render_tiles: int = 4,
        arch: str = "auto",
        substeps: int = 11,
        shards: int | None = None,
        shard_options: dict | None = None,
    ):
        if _forked_after_taichi:
            raise RuntimeError(FORK_REFUSAL)
        self.num_envs = _count(num_envs, "num_envs")
        shards = _count(shards, "shards", allow_none=True)
        if shards is not None and shards > self.num_envs:
            raise ValueError(f"shards ({shards}) must not exceed num_envs ({self.num_envs})")
        if shard_options is not None and shards is None:
            raise ValueError("shard_options needs shards")
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.max_episode_steps = _count(max_episode_steps, "max_episode_steps", allow_none=True)
        self.randomization = parse_randomize(randomize, self.randomization_defaults)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of "
                f"{self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.render_size = _render_size(render_size)
        self.render_tiles = _count(render_tiles, "render_tiles")
        drawn = min(self.render_tiles, self.num_envs)
        if not fx_render.tiles_fit(self.render_size, drawn):
            raise ValueError(
                f"render_tiles: {drawn} tiles do not fit render_size "
                f"{self.render_size} with {fx_render.MIN_TILE_SIDE} pixels a "
                "side each; draw fewer tiles or a larger image"
            )
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}

        # Sleep off: a balanced pole or a hovering lander is slow but must keep moving, and
        # a world at rest must still answer the next action. Sharded: the task is built in
        # one world here, and each shard's actor replicates it (Scene.replicate).
        self.scene = fx.Scene(
            gravity=self.nominal_gravity,
            arch=arch,
            substeps=substeps,
            n_worlds=self.num_envs if shards is None else 1,
            enable_sleep=False,
        )
        self._build_scene()
        # The state the bodies were added with (world 0: every world is built the same),
        # float64 (n_bodies, ...): each reset starts from it.
        built = self.scene.get_state()
        self._built_state = fx.State(
            *(
                np.array(a[0])
                for a in (
                    built.position,
                    built.angle,
                    built.velocity,
                    built.angular_velocity,
                    built.sleeping,
                )
            )
        )
        if shards is not None:
            from fx2d_gpu.distributed import ShardedScene

            self.scene = ShardedScene(
                self.num_envs, template=self.scene, n_shards=shards, shard_options=shard_options
            )
        self._nominal_mass = np.array([self.scene.body_mass(b) for b in self.mass_bodies()])
        self._gravity = np.tile(np.asarray(self.nominal_gravity, np.float64), (self.num_envs, 1))

        self.single_observation_space, self.single_action_space = self._make_spaces()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._streams = WorldStreams(self.num_envs)
        self.episode_steps = np.zeros(self.num_envs, np.int64)
        # Worlds whose episode ended at the last step (NEXT_STEP: reset at the next one;
        # DISABLED: step() refuses until reset).
        self._ended = np.zeros(self.num_envs, bool)
        self._observations: np.ndarray | None = None
        #: The step's per-world work on the device (envs/device_step.py): a DeviceStep the
        #: task's constructor sets where it has one and the env can use it (CartPole,
        #: Lander, Levels); None: the host path.
        self._device = None

    @property
    def device_step(self) -> bool:
        """Whether each world's work of a step (its push, its restart, its observation) is
        worked out on the device (envs/device_step.py), not in NumPy on the host."""
        return self._device is not None

    # ------------------------------------------------------------------ task hooks
    @abc.abstractmethod
    def _build_scene(self) -> None:
        """Add the task's bodies and joints to self.scene (the same in every world)."""

    @abc.abstractmethod
    def _make_spaces(self) -> tuple[gymnasium.Space, gymnasium.Space]:
        """(single observation space, single action space)."""

    def _place_worlds(self, worlds: np.ndarray, draws: np.ndarray) -> None:
        """Put `worlds` ((num_envs,) bool) at their new episodes' start, from their uniform
        draws ((k, n_state_draws) float64 in [0, 1), one row per world being reset, in world
        order): by default scene.reset_worlds with the task's `_initial_states(draws)` (a
        State with one row per world, (k, n_bodies, ...), built from self._built_state). A
        task whose reset writes more than a state (fx2d/Levels-v0: each world's level)
        overrides this instead of defining _initial_states."""
        self.scene.reset_worlds(worlds, self._initial_states(draws))

    @abc.abstractmethod
    def _apply_actions(self, actions: np.ndarray, active: np.ndarray) -> None:
        """Give the scene every world's action for the next step (apply_force, joint
        targets); worlds where `active` is False (being reset) get none.

        Args:
            actions: checked, as _check_actions returns them, (num_envs, ...).
            active: (num_envs,) bool.
        """

    def _check_actions(self, actions) -> np.ndarray:
        """`actions` as an array of action_space's shape, or TypeError / ValueError."""
        space = self.single_action_space
        try:
            array = np.asarray(actions)
        except ValueError:  # NumPy's "inhomogeneous shape" names nothing
            raise TypeError(
                f"actions must be an array of shape "
                f"{(self.num_envs, *space.shape)}, got a ragged sequence"
            ) from None
        if isinstance(space, gymnasium.spaces.Discrete):
            # bool: False is 0 and True is 1, as Gymnasium's vectorised CartPole takes them
            if array.dtype != bool and not np.issubdtype(array.dtype, np.integer):
                raise TypeError(f"actions must be integers or bools, got dtype {array.dtype}")
            if array.shape != (self.num_envs,):
                raise ValueError(f"actions must have shape ({self.num_envs},), got {array.shape}")
            if array.size and (array.min() < space.start or array.max() >= space.start + space.n):
                raise ValueError(
                    f"actions must lie in [{space.start}, "
                    f"{space.start + space.n}), got {array.min()}..{array.max()}"
                )
            return array.astype(np.int64)
        if (
            array.dtype == bool
            or not np.issubdtype(array.dtype, np.number)
            or np.issubdtype(array.dtype, np.complexfloating)
        ):
            raise TypeError(f"actions must be real numbers, got dtype {array.dtype}")
        expected = (self.num_envs, *space.shape)
        if array.shape != expected:
            raise ValueError(f"actions must have shape {expected}, got {array.shape}")
        array = array.astype(np.float64)
        if not np.isfinite(array).all():
            raise ValueError("actions must be finite")
        return np.clip(array, space.low, space.high)  # like Gymnasium's continuous tasks

    @abc.abstractmethod
    def _observe(self) -> np.ndarray:
        """(num_envs, obs_dim) float32: every world's observation, read from the scene."""

    @abc.abstractmethod
    def _score(
        self, observations: np.ndarray, actions: np.ndarray, active: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rewards (num_envs,) float64, terminated (num_envs,) bool) of the step just taken.

        Args:
            observations: _observe()'s, after the step.
            actions: the checked actions of the step.
            active: (num_envs,) bool: False where the action was ignored (a world starting
                over, whose rows of the result are discarded).
        """

    def _read_after_step(self) -> None:
        """Read what the task needs of every world's step right after it, before any world
        restarts (the Lander's contact flags: the step's contacts, which a restart would
        make the scene look for again at every world's poses). Nothing by default."""

    def _start_episodes(self, worlds: np.ndarray, observations: np.ndarray) -> None:
        """Reset the task's per-world bookkeeping of `worlds` ((num_envs,) bool), given the
        first observations (num_envs, obs_dim) of every world."""

    def mass_bodies(self) -> list[int]:
        """The bodies "mass_scale" randomises: every dynamic body."""
        return [b for b in range(self.scene.n_bodies) if self.scene.body_mass(b) > 0]

    def friction_bodies(self) -> list[int]:
        """The bodies "friction" randomises (the task's moving bodies)."""
        return self.mass_bodies()

    def _render_rays(self):
        """Line segments render() draws over each world (see fx2d_gpu.draw.render), or None."""
        return None

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every world, or the worlds of options["reset_mask"], and return the batch of
        observations.

        Args:
            seed: None (each world's stream goes on), an int s (world i is seeded with
                s + i), or a list of num_envs ints or Nones (one per world).
            options: None, or {"reset_mask": np.ndarray of bool, (num_envs,)}: only the
                True worlds are reset (and seeded); at least one must be True.

        Returns:
            (observations (num_envs, obs_dim) float32, infos {}). Worlds not reset keep
            their observation bit for bit.

        Raises:
            TypeError, ValueError: a bad seed, an unknown option, or a reset_mask that is not
                a bool array of shape (num_envs,) with a True.
            RuntimeError: the environment is closed.
        """
        self._check_open()
        mask = np.ones(self.num_envs, bool)
        if options is not None and not isinstance(options, dict):
            raise TypeError(
                f"options must be None or a dict such as {{'reset_mask': mask}}, "
                f"got {type(options).__name__}"
            )
        if options:
            unknown = sorted(set(options) - {"reset_mask"}, key=str)
            if unknown:
                raise ValueError(
                    f"options: unknown key(s) {unknown}; the only option is 'reset_mask'"
                )
            if "reset_mask" in options:
                mask = self._check_reset_mask(options["reset_mask"])
        seeded, seeds = self._check_seed(seed)
        if isinstance(seed, int | np.integer):
            super().reset(seed=int(seed))  # VectorEnv's own np_random, as Gymnasium's do
        worlds = np.flatnonzero(mask & seeded)
        self._streams.seed(worlds, seeds[worlds])
        observations = self._start_over(mask)
        self._ended[mask] = False
        self._start_episodes(mask, observations)
        self._observations = observations
        return observations.copy(), {}

    def step(
        self, actions
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Take every world's action, advance the scene one step of dt, and autoreset as
        metadata["autoreset_mode"] says (see the class docstring).

        Args:
            actions (array_like): a batch of action_space: (num_envs,) ints for a Discrete task
                (or bools: False is action 0, True action 1), (num_envs, k) floats for a Box
                one (clipped to the box).

        Returns:
            (observations (num_envs, obs_dim) float32, rewards (num_envs,) float64,
            terminations (num_envs,) bool, truncations (num_envs,) bool, infos dict).

        Raises:
            TypeError, ValueError: actions of the wrong dtype, shape or range.
            RuntimeError: reset() was never called, the environment is closed, or (DISABLED
                mode) a world that ended has not been reset.
        """
        self._check_open()
        if self._observations is None:
            raise RuntimeError("call reset() before step()")
        actions = self._check_actions(actions)
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED and self._ended.any():
            raise RuntimeError(
                f"autoreset_mode=DISABLED: worlds {np.flatnonzero(self._ended).tolist()} "
                f"ended and were not reset; call reset(options={{'reset_mask': mask}}) first"
            )
        resetting = (
            self._ended.copy() if mode == AutoresetMode.NEXT_STEP else np.zeros(self.num_envs, bool)
        )
        active = ~resetting
        observations, rewards, terminated = self._advance(actions, active, resetting)
        if self.max_episode_steps is None:
            truncated = np.zeros(self.num_envs, bool)
        else:
            truncated = active & (self.episode_steps >= self.max_episode_steps)
        infos: dict[str, Any] = {}
        ended = terminated | truncated
        if mode == AutoresetMode.SAME_STEP and ended.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for world in np.flatnonzero(ended):  # bookkeeping: one view per ended world
                final_obs[world] = observations[world].copy()
            infos = {
                "final_obs": final_obs,
                "_final_obs": ended.copy(),
                "final_info": {},
                "_final_info": ended.copy(),
            }
            observations = self._restart(ended)
            self._ended[:] = False
        else:
            self._ended = ended
        self._observations = observations
        return observations.copy(), rewards, terminated, truncated, infos

    def render(self) -> np.ndarray | None:
        """An RGB image of the first render_tiles worlds, as a grid of tiles, drawn offscreen
        (no window, no display).

        Returns:
            (height, width, 3) uint8, render_size (see Args); None when render_mode is None
            (with a warning, as Gymnasium's environments do).
        """
        self._check_open()
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() called with render_mode=None: pass "
                "render_mode='rgb_array' to the constructor"
            )
            return None
        options = dict(
            size=self.render_size,
            bounds=self.render_bounds,
            max_tiles=self.render_tiles,
            rays=self._render_rays(),
        )
        if isinstance(self.scene, fx.Scene):
            return fx_render.render_worlds(self.scene, **options)
        # Sharded: the first shard draws its first worlds (world w there is world w here).
        options["max_tiles"] = min(self.render_tiles, len(self.scene.shard_worlds[0]))
        return self.scene.inspect(fx_render.render_worlds, **options)

    def close_extras(self, **kwargs: Any) -> None:
        """Release the scene (its device memory goes with it); close() calls it once.

        Args:
            **kwargs (Any): close()'s keywords (none are used).
        """
        if self.scene is not None and not isinstance(self.scene, fx.Scene):
            self.scene.close()  # the shards' actors
        self.scene = None

    # ------------------------------------------------------------------ internals
    def _check_open(self):
        if self.closed or self.scene is None:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _check_reset_mask(self, mask) -> np.ndarray:
        if not isinstance(mask, np.ndarray):
            raise TypeError(
                f"options['reset_mask'] must be a numpy array, got {type(mask).__name__}"
            )
        if mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask'] must have dtype bool, got {mask.dtype}")
        if mask.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}"
            )
        if not mask.any():
            raise ValueError("options['reset_mask'] must have at least one True")
        return mask.copy()

    def _check_seed(self, seed) -> tuple[np.ndarray, np.ndarray]:
        """(seeded (num_envs,) bool, seeds (num_envs,) uint64): which worlds `seed` seeds,
        and with what (modulo 2^64)."""
        n = self.num_envs
        if seed is None:
            return np.zeros(n, bool), np.zeros(n, np.uint64)
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            if seed < 0:
                raise ValueError(f"seed must be >= 0, got {seed}")
            # seed + i for world i, wrapping like the streams' arithmetic.
            return np.ones(n, bool), np.uint64(int(seed) % 2**64) + np.arange(n, dtype=np.uint64)
        if isinstance(seed, list | tuple | np.ndarray):
            if len(seed) != n:
                raise ValueError(
                    f"seed: a list of seeds must have num_envs={n} entries, got {len(seed)}"
                )
            seeded = np.array([s is not None for s in seed], bool)
            for s in seed:
                if s is not None and (
                    isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0
                ):
                    raise ValueError(f"seed: each seed must be an int >= 0 or None, got {s!r}")
            seeds = np.array([0 if s is None else int(s) % 2**64 for s in seed], np.uint64)
            return seeded, seeds
        raise TypeError(f"seed must be None, an int or a list of ints, got {type(seed).__name__}")

    def _advance(
        self, actions: np.ndarray, active: np.ndarray, restarting: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply the actions of the `active` worlds, step the scene once (every world),
        count the active worlds' steps, start the `restarting` worlds over, then observe and
        score every world: (observations, rewards, terminated).

        Restarting worlds (NEXT_STEP: they ended at the last step) took the step as they
        were, in the same batched step as the others, and are then reset; they return their
        first observation, reward 0 and terminated False. Resetting them after the step and
        before observing reads every world once.
        """
        if self._device is not None:
            self._device.push(actions)  # (a restarting world's push: see device_step.py)
        else:
            self._apply_actions(actions, active)
        self.scene.step(self.dt)
        self._read_after_step()
        self.episode_steps += active
        restart = restarting is not None and restarting.any()
        observations = self._start_over(restarting if restart else None)
        rewards, terminated = self._score(observations, actions, active)
        if restart:
            self._start_episodes(restarting, observations)
            rewards[restarting] = 0.0
            terminated[restarting] = False
        return observations, rewards, terminated

    def _restart(self, worlds: np.ndarray) -> np.ndarray:
        """Reset `worlds` ((num_envs,) bool) to fresh episodes; every world's observation."""
        observations = self._start_over(worlds)
        self._start_episodes(worlds, observations)
        return observations

    def _start_over(self, worlds: np.ndarray | None) -> np.ndarray:
        """Reset `worlds` ((num_envs,) bool; None: none) to new initial states, then every
        world's observation (num_envs, obs_dim): on the device in one launch where the task
        has a DeviceStep (envs/device_step.py), else _reset_worlds and _observe."""
        if self._device is not None:
            observations = self._device.observe(worlds)
            if worlds is not None:
                self.episode_steps[worlds] = 0
            return observations
        if worlds is not None:
            self._reset_worlds(worlds)
        return self._observe()

    def _reset_worlds(self, worlds: np.ndarray) -> None:
        """Put `worlds` ((num_envs,) bool) at new initial states drawn from their streams,
        with newly drawn physical values where domain randomisation is on."""
        indices = np.flatnonzero(worlds)
        draws = self._streams.uniform(indices, self.n_state_draws + self._n_random_draws())
        self._place_worlds(worlds, draws[:, : self.n_state_draws])
        if self.randomization:
            self._randomize(worlds, draws[:, self.n_state_draws :])
        self.episode_steps[worlds] = 0

    def _n_random_draws(self) -> int:
        count = 0
        for key in self.randomization:
            count += len(self._nominal_mass) if key == "mass_scale" else 1
        return count

    def _randomize(self, worlds: np.ndarray, draws: np.ndarray) -> None:
        """Set the randomised values of `worlds` from their draws (k, _n_random_draws())."""
        column = 0
        for key, (low, high) in self.randomization.items():
            if key == "mass_scale":
                width = len(self._nominal_mass)
                scale = low + (high - low) * draws[:, column : column + width]
                self.scene.set_body_params(
                    self.mass_bodies(), mass=self._nominal_mass * scale, world=worlds
                )
            elif key == "friction":
                width = 1
                friction = (low + (high - low) * draws[:, column])[:, None]
                self.scene.set_body_params(
                    self.friction_bodies(),
                    static_friction=friction,
                    dynamic_friction=friction,
                    world=worlds,
                )
            else:  # gravity: its magnitude, along the nominal direction
                width = 1
                magnitude = low + (high - low) * draws[:, column]
                direction = np.asarray(self.nominal_gravity, np.float64)
                direction = direction / max(np.linalg.norm(direction), 1e-300)
                self._gravity[worlds] = magnitude[:, None] * direction
                self.scene.set_gravity(self._gravity)
            column += width

    def _rows(self, k: int) -> fx.State:
        """k copies of the built state, to be changed into k worlds' initial states."""
        built = self._built_state
        return fx.State(
            *(
                np.repeat(a[None], k, axis=0)
                for a in (
                    built.position,
                    built.angle,
                    built.velocity,
                    built.angular_velocity,
                    built.sleeping,
                )
            )
        )


class Fx2DEnv(gymnasium.Env):
    """A one-world `gymnasium.Env` of a task: its vector env with num_envs=1, stepped without
    autoreset.

    The one-world env seeded s runs the episode world w of the vector env seeded s - w runs
    (the same scene code and random stream). It does not truncate by itself:
    gymnasium.make wraps it in TimeLimit with the registered max_episode_steps. Steps after
    the end of an episode are allowed (the physics goes on); reset() starts a new one.

    Subclasses set `vector_class` and pass the task's arguments to __init__.

    Args:
        render_mode: None or "rgb_array".
        **task_options (Any): the task's other arguments (continuous, randomize, arch, ...),
            passed to vector_class.

    Attributes:
        vector_class (type[Fx2DVectorEnv]): the task's vector environment.
        worlds (Fx2DVectorEnv): the one-world vector env doing the work.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 50}
    vector_class: type[Fx2DVectorEnv] = Fx2DVectorEnv

    def __init__(self, render_mode: str | None = None, **task_options: Any):
        _check_start_method()
        self.worlds = self.vector_class(
            num_envs=1,
            autoreset_mode=AutoresetMode.DISABLED,
            max_episode_steps=None,
            render_mode=render_mode,
            render_tiles=1,
            **task_options,
        )
        self.render_mode = render_mode
        self.observation_space = self.worlds.single_observation_space
        self.action_space = self.worlds.single_action_space
        self.metadata = {**type(self).metadata, "render_fps": round(1.0 / self.worlds.dt)}

    @property
    def scene(self) -> fx.Scene:
        """The one-world scene (world 0 is this environment)."""
        return self.worlds.scene

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: (observation (obs_dim,) float32, info {}).

        Args:
            seed: None (the random stream goes on) or an int >= 0.
            options: None, {} or {"reset_mask": np.array([True])}.
        """
        super().reset(seed=seed)
        observations, _ = self.worlds.reset(seed=seed, options=options)
        return observations[0], {}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Take `action` (an element of action_space; for a Discrete task also a bool,
        False for 0 and True for 1) for one step of dt.

        Returns:
            (observation (obs_dim,) float32, reward, terminated, False, {}).
        """
        self.worlds._check_open()
        if self.worlds._observations is None:
            raise RuntimeError("call reset() before step()")
        actions = self.worlds._check_actions(np.asarray(action)[None])
        observations, rewards, terminated = self.worlds._advance(actions, np.ones(1, bool))
        self.worlds._observations = observations
        return observations[0], float(rewards[0]), bool(terminated[0]), False, {}

    def render(self) -> np.ndarray | None:
        """(height, width, 3) uint8: the world drawn offscreen; None without a render_mode."""
        return self.worlds.render()

    def close(self) -> None:
        """Release the scene; closing twice is allowed."""
        self.worlds.close()
