"""Stable-Baselines3 adapter: fx2d_gpu's vector environments as SB3 `VecEnv`s.

SB3's algorithms take a `stable_baselines3.common.vec_env.VecEnv`, whose conventions differ
from Gymnasium 1.x's `VectorEnv`: `step()` returns (obs, rewards, dones, infos) with one info
dict per sub-environment, a finished sub-environment is reset in the same step and its last
observation is `infos[i]["terminal_observation"]`, and `infos[i]["TimeLimit.truncated"]`
tells a time limit from a real end. `SB3VecEnv` gives an fx2d vector env (or any Gymnasium
1.x vector env) those conventions, without a Python loop over the worlds:

```python
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor
from fx2d_gpu.envs import CartPoleVectorEnv
from fx2d_gpu.envs.sb3 import SB3VecEnv

venv = VecMonitor(SB3VecEnv(CartPoleVectorEnv(16, autoreset_mode="SameStep")))
model = PPO("MlpPolicy", venv, seed=0).learn(20_000)
```

or `make_sb3_vec_env("fx2d/CartPole-v0", 16)`, which builds the same.

Needs stable-baselines3 (the `sb3` extra: `pip install "fx2d_gpu[sb3]"`, which installs
PyTorch too); `import fx2d_gpu.envs` does not.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

try:
    from stable_baselines3.common.vec_env import VecEnv, VecMonitor
except ImportError as error:
    raise ImportError(
        "fx2d_gpu.envs.sb3 needs stable-baselines3, the sb3 extra: from a checkout of "
        'fx2d_gpu, pip install -e ".[sb3]" (in its root folder); from a package index, '
        'pip install "fx2d_gpu[sb3]"'
    ) from error

__all__ = ["SB3VecEnv", "make_sb3_vec_env"]

#: The keys of Gymnasium's SAME_STEP infos that SB3VecEnv turns into SB3's.
_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


def split_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's vector infos (a dict of arrays, each key `k` with a mask `_k`, nested
    for dict values) as SB3's: a list of one dict per sub-environment.

    Args:
        infos: a Gymnasium 1.x vector env's infos.
        num_envs: the number of sub-environments.

    Returns:
        num_envs dicts; sub-environment i's holds the keys whose mask is True at i (keys
        without a mask are given to every sub-environment).
    """
    split: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in infos:
            continue  # a mask
        mask = infos.get(f"_{key}")
        if isinstance(value, dict):
            parts = split_infos(value, num_envs)
            for i in range(num_envs):
                if (mask is None and parts[i]) or (mask is not None and mask[i]):
                    split[i][key] = parts[i]
            continue
        for i in range(num_envs):
            if mask is None:
                split[i][key] = value[i] if _per_env(value, num_envs) else value
            elif mask[i]:
                split[i][key] = value[i]
    return split


def _per_env(value: Any, num_envs: int) -> bool:
    return isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == num_envs


class SB3VecEnv(VecEnv):
    """An fx2d vector env (any Gymnasium 1.x `VectorEnv`) as a Stable-Baselines3 `VecEnv`.

    SB3's conventions, as its `DummyVecEnv` has them:

    - `reset()` returns the observations only; seeds set by `seed(s)` (sub-environment i
      gets s + i, as fx2d's own `reset(seed=s)`) and options set by `set_options` are used
      at the next reset, once.
    - `step_async(actions)` then `step_wait()` (or `step(actions)`) returns (observations
      (num_envs, ...), rewards (num_envs,) float32, dones (num_envs,) bool, infos: a list
      of num_envs dicts). A sub-environment that ends (terminated or truncated) is reset in
      the same step: its returned observation is its new episode's first, and its info has
      `"terminal_observation"` (the last observation of the episode that ended) and the
      final step's infos. Every info has `"TimeLimit.truncated"`: truncated and not
      terminated.

    How ended sub-environments are reset depends on the wrapped env's
    `metadata["autoreset_mode"]`: SAME_STEP (fastest: `fx2d_gpu.envs` reset and observe the
    ended worlds in the step itself) uses its `infos["final_obs"]`; NEXT_STEP (Gymnasium's
    default) and DISABLED reset them at once with `reset(options={"reset_mask": dones})`,
    which every fx2d env, and Gymnasium's own vector envs, accept.

    The sub-environments of an fx2d vector env are worlds of one `Scene`, not separate
    objects: `get_attr(name)` returns the vector env's attribute for each index (the
    single-environment spaces for "observation_space" and "action_space"), `set_attr`
    sets it on the vector env (so for every sub-environment: `indices` must name them
    all), and `env_method(name, ...)` calls the vector env's method once and returns its
    result for each index. `render()` returns the vector env's own image (with
    render_mode="rgb_array", fx2d's tiles of the first worlds).

    Episode statistics (`infos[i]["episode"]`, SB3's `ep_rew_mean` in the logs) come from
    wrapping this in SB3's `VecMonitor`, as with any VecEnv; `make_sb3_vec_env` does it.

    Args:
        env (gymnasium.vector.VectorEnv): the vector env, e.g.
            `CartPoleVectorEnv(16, autoreset_mode="SameStep")` or
            `gymnasium.make_vec("fx2d/CartPole-v0", 16, vectorization_mode="vector_entry_point")`.
            The adapter owns it from then on: close() closes it.

    Attributes:
        env (gymnasium.vector.VectorEnv): the wrapped vector env.
        autoreset_mode (AutoresetMode): its autoreset mode.
    """

    def __init__(self, env: gymnasium.vector.VectorEnv):
        if not isinstance(env, gymnasium.vector.VectorEnv):
            raise TypeError(
                f"SB3VecEnv wraps a Gymnasium 1.x vector env (gymnasium.vector.VectorEnv, "
                f"e.g. CartPoleVectorEnv or gymnasium.make_vec(...)), got {type(env).__name__}; "
                "for one gymnasium.Env use SB3's own DummyVecEnv([lambda: env])"
            )
        self.env = env
        self.autoreset_mode = AutoresetMode(
            env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        )
        self._actions: np.ndarray | None = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    # ------------------------------------------------------------------ SB3's VecEnv API
    def reset(self) -> np.ndarray:
        """Reset every sub-environment, with the seeds and options given since the last reset
        (then forgotten, as SB3's VecEnvs do).

        Returns:
            (num_envs, ...) observations; `self.reset_infos` holds the infos, one dict each.
        """
        seed = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options
        if any(options):
            if any(o != options[0] for o in options):
                raise ValueError(
                    "SB3VecEnv: the sub-environments are reset together and take one options "
                    f"dict; set_options gave them different ones: {options}"
                )
            observations, infos = self.env.reset(seed=seed, options=dict(options[0]))
        else:
            observations, infos = self.env.reset(seed=seed)
        self.reset_infos = split_infos(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        self._actions = None
        return observations

    def step_async(self, actions: np.ndarray) -> None:
        """Keep the actions for step_wait (which takes the step; the worlds of one scene step
        together, so there is nothing to start earlier)."""
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every sub-environment with step_async's actions, resetting those that end.

        Returns:
            (observations, rewards float32, dones bool, infos): see the class docstring.
        """
        if self._actions is None:
            raise RuntimeError("SB3VecEnv: call step_async(actions) before step_wait()")
        actions, self._actions = self._actions, None
        observations, rewards, terminated, truncated, infos = self.env.step(actions)
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool)
        dones = terminated | truncated
        infos = dict(infos)  # (the keys of the ends are taken out of a copy)
        final = {key: infos.pop(key) for key in _FINAL_KEYS if key in infos}
        step_infos = split_infos(infos, self.num_envs)
        timeout = truncated & ~terminated
        for i, info in enumerate(step_infos):
            info["TimeLimit.truncated"] = bool(timeout[i])
        if "final_obs" in final:  # SAME_STEP: the ended ones are reset, their ends in infos
            final_obs = final["final_obs"]
            final_infos = split_infos(final.get("final_info", {}), self.num_envs)
            for i in np.flatnonzero(dones):
                step_infos[i].update(final_infos[i])
        elif dones.any():  # NEXT_STEP, DISABLED: reset the ended ones now
            final_obs = observations
            observations, reset_infos = self.env.reset(options={"reset_mask": dones.copy()})
            for i, info in enumerate(split_infos(reset_infos, self.num_envs)):
                if dones[i]:
                    self.reset_infos[i] = info
        for i in np.flatnonzero(dones):
            step_infos[i]["terminal_observation"] = np.array(final_obs[i])
        return observations, np.asarray(rewards, np.float32), dones, step_infos

    def close(self) -> None:
        """Close the wrapped vector env (fx2d: release its scene)."""
        self.env.close()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next reset: sub-environment i gets seed + i (SB3's VecEnv.seed, which
        matches fx2d's reset(seed=seed)); None draws a seed.

        Returns:
            The num_envs seeds.
        """
        return super().seed(seed)

    def get_attr(self, attr_name: str, indices: Iterable[int] | int | None = None) -> list[Any]:
        """The wrapped vector env's attribute, once per index (the single-environment spaces
        for "observation_space" and "action_space").

        Raises:
            AttributeError: the vector env has no such attribute.
        """
        if attr_name in ("observation_space", "action_space"):
            value = getattr(self.env, f"single_{attr_name}")
        else:
            value = getattr(self.env, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(
        self, attr_name: str, value: Any, indices: Iterable[int] | int | None = None
    ) -> None:
        """Set the wrapped vector env's attribute: for every sub-environment at once.

        Raises:
            ValueError: `indices` leaves some sub-environment out (they share the attribute).
        """
        self._check_all(indices, "set_attr")
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: Iterable[int] | int | None = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call the wrapped vector env's method once; its result, once per index."""
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(
        self, wrapper_class: type, indices: Iterable[int] | int | None = None
    ) -> list[bool]:
        """Whether the vector env is, or is wrapped in, `wrapper_class` (a Gymnasium vector
        wrapper), once per index. SB3's Monitor (a one-env wrapper) is never here: use
        VecMonitor."""
        env, wrapped = self.env, False
        while env is not None and not wrapped:
            wrapped = isinstance(env, wrapper_class)
            env = getattr(env, "env", None)
        return [wrapped for _ in self._get_indices(indices)]

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The wrapped env's image ((height, width, 3) uint8; fx2d: its first worlds as
        tiles) where it was built with render_mode="rgb_array", else None with a warning.

        Args:
            mode: None or "rgb_array" (render modes are chosen when the env is built).
        """
        if self.render_mode != "rgb_array" or mode not in (None, "rgb_array"):
            warnings.warn(
                f"SB3VecEnv.render(mode={mode!r}): the wrapped env's render_mode is "
                f"{self.render_mode!r}; build it with render_mode='rgb_array' and call "
                "render() or render('rgb_array')",
                stacklevel=2,
            )
            return None
        return self.env.render()

    # ------------------------------------------------------------------ internals
    def _check_all(self, indices, what: str) -> None:
        chosen = set(self._get_indices(indices))
        if chosen != set(range(self.num_envs)):
            raise ValueError(
                f"SB3VecEnv.{what}: the sub-environments are worlds of one vector env and "
                f"share its attributes; pass indices=None (all {self.num_envs}), got "
                f"{sorted(chosen)}"
            )


def make_sb3_vec_env(
    env_id: str, num_envs: int, *, seed: int | None = None, monitor: bool = True, **env_kwargs: Any
) -> VecEnv:
    """An SB3 VecEnv of `num_envs` worlds of a registered fx2d task, ready for an algorithm:
    `gymnasium.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point",
    autoreset_mode="SameStep", **env_kwargs)` in an SB3VecEnv, in a VecMonitor.

    Args:
        env_id: a registered id, e.g. "fx2d/CartPole-v0" (import fx2d_gpu.envs registers
            them).
        num_envs: the number of sub-environments (worlds of one scene), >= 1.
        seed: None, or an int: sub-environment i is seeded seed + i at the first reset.
        monitor: wrap in SB3's VecMonitor (episode returns and lengths in the infos and
            SB3's logs).
        **env_kwargs (Any): the task's arguments (arch, continuous, randomize, ...).
    """
    import fx2d_gpu.envs  # noqa: F401  (registers the ids)

    env_kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
    vector = gymnasium.make_vec(
        env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs
    )
    venv: VecEnv = SB3VecEnv(vector)
    if seed is not None:
        venv.seed(seed)
    if monitor:
        venv = VecMonitor(venv)
    return venv
