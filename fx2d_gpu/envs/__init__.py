"""Gymnasium 1.x environments simulated by fx2d_gpu, many worlds in one scene.

Importing this package registers the tasks with Gymnasium:

| id | one world (`gymnasium.make`) | vector (`gymnasium.make_vec`) |
|---|---|---|
| `fx2d/CartPole-v0` | CartPoleEnv | CartPoleVectorEnv |
| `fx2d/Lander-v0` | LanderEnv | LanderVectorEnv |
| `fx2d/Levels-v0` | LevelsEnv | LevelsVectorEnv |

```python
import gymnasium
import fx2d_gpu.envs  # registers the ids

envs = gymnasium.make_vec("fx2d/CartPole-v0", num_envs=256,
                          vectorization_mode="vector_entry_point", arch="cpu")
observations, infos = envs.reset(seed=0)          # world i seeded 0 + i
observations, rewards, terminations, truncations, infos = envs.step(
    envs.action_space.sample())
```

A vector env is one `fx2d_gpu.Scene(n_worlds=num_envs)`: one scene.step advances every
sub-environment (see Fx2DVectorEnv for autoreset, seeding and domain randomisation).
Discrete tasks take bool actions too (False is 0, True is 1), as Gymnasium's vectorised
CartPole does. Each spec has a `reward_threshold` (REWARD_THRESHOLDS). For
Stable-Baselines3, `fx2d_gpu.envs.sb3.SB3VecEnv` adapts a vector env to SB3's VecEnv.

Needs gymnasium >= 1.0, the `rl` extra (from a checkout: `pip install -e ".[rl]"`; from an
index: `pip install "fx2d_gpu[rl]"`); `import fx2d_gpu` does not.
"""

try:
    import gymnasium
    from gymnasium.vector import AutoresetMode  # noqa: F401  (gymnasium 1.x only)
except ImportError as error:  # gymnasium missing, or a 0.x version
    raise ImportError(
        "fx2d_gpu.envs needs gymnasium >= 1.0, the rl extra: from a checkout "
        'of fx2d_gpu, pip install -e ".[rl]" (in its root folder); from a '
        'package index, pip install "fx2d_gpu[rl]"'
    ) from error

from .base import Fx2DEnv, Fx2DVectorEnv, WorldStreams, parse_randomize
from .cartpole import CartPoleEnv, CartPoleVectorEnv
from .lander import LanderEnv, LanderVectorEnv
from .levels import Level, LevelsEnv, LevelsVectorEnv

__all__ = [
    "CartPoleEnv",
    "CartPoleVectorEnv",
    "Fx2DEnv",
    "Fx2DVectorEnv",
    "LanderEnv",
    "LanderVectorEnv",
    "Level",
    "LevelsEnv",
    "LevelsVectorEnv",
    "REGISTERED_IDS",
    "REWARD_THRESHOLDS",
    "WorldStreams",
    "parse_randomize",
]

#: The ids registered with Gymnasium, and their truncation lengths (steps).
REGISTERED_IDS = {"fx2d/CartPole-v0": 500, "fx2d/Lander-v0": 1000, "fx2d/Levels-v0": 500}

#: The ids' `spec.reward_threshold`: the mean return over 100 episodes at which the task
#: counts as solved. CartPole: Gymnasium's CartPole-v1's 475 (the same 500-step episodes,
#: one point a step). Lander: Gymnasium's LunarLander-v3's 200, as its reward is
#: LunarLander's (the same shaping, fuel costs and +-100 for resting or crashing);
#: LunarLander's own heuristic controller scores 275 on average here (233 to 311 over 200
#: episodes, seeds 0 to 199, every one landed), a random policy -273, doing nothing -224.
#: Levels: reaching a goal returns its start distance (4 m to 9 m, 6.5 m on average) less
#: the goal radius (0.6 m), plus 10; 15 is reaching about 95 % of them. A controller that
#: turns its wheels towards the goal, blind to the level, scores 15.2 (95 of 100 levels,
#: seeds 0 to 99, reached), a random policy 0.08, standing still 0.0.
REWARD_THRESHOLDS = {"fx2d/CartPole-v0": 475.0, "fx2d/Lander-v0": 200.0, "fx2d/Levels-v0": 15.0}

for _id, _module, _name in (
    ("fx2d/CartPole-v0", "cartpole", "CartPole"),
    ("fx2d/Lander-v0", "lander", "Lander"),
    ("fx2d/Levels-v0", "levels", "Levels"),
):
    if _id not in gymnasium.registry:  # a reload must not re-register (Gymnasium warns)
        gymnasium.register(
            id=_id,
            entry_point=f"fx2d_gpu.envs.{_module}:{_name}Env",
            vector_entry_point=f"fx2d_gpu.envs.{_module}:{_name}VectorEnv",
            max_episode_steps=REGISTERED_IDS[_id],
            reward_threshold=REWARD_THRESHOLDS[_id],
        )
