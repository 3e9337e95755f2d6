"""fx2d_gpu.envs.sb3: the vector envs as Stable-Baselines3 VecEnvs (the `sb3` extra).

Every test that needs stable-baselines3 (and so PyTorch) skips where it is not installed;
the module imports without it (tests/test_self_contained.py imports every test module).
"""

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

ARCH = os.environ.get("FX2D_TEST_ARCH", "cpu")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sb3():
    """stable_baselines3, or a skip naming the extra; torch on one thread (see
    one_torch_thread)."""
    pytest.importorskip("gymnasium", minversion="1.0")
    module = pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
    import fx2d_gpu.envs  # noqa: F401  (registers the fx2d/... ids)

    one_torch_thread()
    return module


def one_torch_thread():
    """PyTorch on one thread: on a few busy cores its worker threads and Taichi's fight for
    them (PPO on CartPole measured 4x slower with 2 threads on the 2-core CI machine)."""
    import torch

    torch.set_num_threads(1)


def cartpoles(num_envs=4, **options):
    from fx2d_gpu.envs import CartPoleVectorEnv

    return CartPoleVectorEnv(num_envs, arch=ARCH, **options)


def test_the_adapter_says_how_to_install_stable_baselines3():
    pytest.importorskip("gymnasium", minversion="1.0")
    code = (
        "import sys\n"
        "sys.modules['stable_baselines3'] = None  # as if it were not installed\n"
        "import fx2d_gpu.envs\n"
        "try:\n"
        "    import fx2d_gpu.envs.sb3\n"
        "except ImportError as error:\n"
        "    print('ImportError:', error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'pip install -e ".[sb3]"' in result.stdout
    assert 'pip install "fx2d_gpu[sb3]"' in result.stdout


@pytest.mark.parametrize("task_id", ["fx2d/CartPole-v0", "fx2d/Lander-v0"])
@pytest.mark.parametrize("continuous", [False, True])
def test_one_world_envs_pass_sb3s_check_env(sb3, task_id, continuous):
    import gymnasium
    from stable_baselines3.common.env_checker import check_env

    env = gymnasium.make(task_id, arch=ARCH, continuous=continuous)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert not [str(w.message) for w in caught]
    env.close()


def sb3_rollout(venv, actions):
    """SB3's step results for `actions`, after seed(7) and reset()."""
    venv.seed(7)
    record = [(venv.reset(), None, None, None)]
    for action in actions:
        obs, rewards, dones, infos = venv.step(action)
        record.append((obs, rewards, dones, infos))
    return record


@pytest.mark.parametrize("mode", ["SameStep", "NextStep", "Disabled"])
def test_the_adapter_steps_as_sb3s_dummy_vec_env_over_one_world_envs(sb3, mode):
    """World w of the adapted vector env and the one-world env w of SB3's DummyVecEnv (seeded
    7 + w by SB3's seed(7)) run the same episodes, bit for bit, in every autoreset mode of the
    vector env: the same observations (the first of the next episode where one ends),
    rewards, dones, terminal_observation and TimeLimit.truncated (15-step episodes: some end
    by the time limit, some by the pole falling)."""
    import gymnasium
    from stable_baselines3.common.vec_env import DummyVecEnv

    from fx2d_gpu.envs.sb3 import SB3VecEnv

    n, limit = 4, 15
    adapted = SB3VecEnv(cartpoles(n, autoreset_mode=mode, max_episode_steps=limit))
    dummy = DummyVecEnv(
        [
            lambda: gymnasium.make("fx2d/CartPole-v0", arch=ARCH, max_episode_steps=limit)
            for _ in range(n)
        ]
    )
    rng = np.random.default_rng(3)
    actions = [rng.integers(0, 2, n) for _ in range(80)]
    ours, theirs = sb3_rollout(adapted, actions), sb3_rollout(dummy, actions)
    ends = {"terminated": 0, "truncated": 0}
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        np.testing.assert_array_equal(a[0], b[0], err_msg=f"step {step}")
        assert a[0].dtype == np.float32 and a[0].shape == (n, 4)
        if step == 0:
            continue
        np.testing.assert_array_equal(a[1], b[1])
        assert a[1].dtype == b[1].dtype == np.float32
        np.testing.assert_array_equal(a[2], b[2])
        assert a[2].dtype == np.bool_
        assert len(a[3]) == n
        for info, expected in zip(a[3], b[3], strict=True):
            assert set(info) == set(expected), (info, expected)
            assert info["TimeLimit.truncated"] == expected["TimeLimit.truncated"]
            if "terminal_observation" in expected:
                np.testing.assert_array_equal(
                    info["terminal_observation"], expected["terminal_observation"]
                )
                ends["truncated" if info["TimeLimit.truncated"] else "terminated"] += 1
    assert ends["terminated"] >= 4 and ends["truncated"] >= 4, ends
    adapted.close()
    dummy.close()


def test_the_adapter_seeds_like_fx2d_and_answers_sb3s_questions(sb3):
    import gymnasium
    from stable_baselines3.common.vec_env import VecEnv

    from fx2d_gpu.envs import CartPoleVectorEnv
    from fx2d_gpu.envs.sb3 import SB3VecEnv, split_infos

    env = cartpoles(3, render_mode="rgb_array", render_size=(120, 80), render_tiles=3)
    venv = SB3VecEnv(env)
    assert isinstance(venv, VecEnv) and venv.num_envs == 3
    assert venv.observation_space == env.single_observation_space
    assert venv.action_space == gymnasium.spaces.Discrete(2)
    # seed(s): sub-environment i seeded s + i at the next reset, as fx2d's reset(seed=s).
    assert venv.seed(5) == [5, 6, 7]
    obs = venv.reset()
    expected, _ = cartpoles(3).reset(seed=5)
    np.testing.assert_array_equal(obs, expected)
    assert not np.array_equal(venv.reset(), obs)  # seeds are used once
    assert venv.get_attr("render_mode") == ["rgb_array"] * 3
    assert venv.get_attr("action_space", indices=[1]) == [gymnasium.spaces.Discrete(2)]
    assert venv.get_attr("max_episode_steps", indices=2) == [500]
    assert venv.has_attr("scene") and not venv.has_attr("no_such_attribute")
    venv.set_attr("max_episode_steps", 20)
    assert env.max_episode_steps == 20
    with pytest.raises(ValueError, match="share"):
        venv.set_attr("max_episode_steps", 30, indices=[0])
    assert venv.env_method("mass_bodies", indices=[0, 2]) == [env.mass_bodies()] * 2
    assert venv.env_is_wrapped(gymnasium.Wrapper) == [False] * 3
    assert venv.env_is_wrapped(CartPoleVectorEnv) == [True] * 3
    frame = venv.render()
    assert frame.shape == (80, 120, 3) and frame.dtype == np.uint8
    with pytest.warns(UserWarning, match="render_mode"):
        assert venv.render("human") is None
    with pytest.raises(RuntimeError, match="step_async"):
        venv.step_wait()
    with pytest.raises(TypeError, match="DummyVecEnv"):
        SB3VecEnv(gymnasium.make("fx2d/CartPole-v0", arch=ARCH))
    # Gymnasium's infos (a dict of arrays with masks, nested) as one dict per env.
    infos = {"a": np.arange(3), "_a": np.array([True, False, True]), "b": {"c": np.ones(3)}}
    infos["_b"] = np.array([False, True, False])
    assert split_infos(infos, 3) == [{"a": 0}, {"b": {"c": 1.0}}, {"a": 2}]
    venv.close()
    assert env.closed


def test_the_adapter_passes_vec_check_nan_and_ppo_learns_on_it(sb3):
    """SB3's VecCheckNan over a short PPO run (CartPole, discrete), and PPO on the
    continuous lander through make_sb3_vec_env (VecMonitor's episodes in the infos)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor

    from fx2d_gpu.envs.sb3 import SB3VecEnv, make_sb3_vec_env

    venv = VecCheckNan(SB3VecEnv(cartpoles(8, autoreset_mode="SameStep")), raise_exception=True)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0)
    model.learn(512)
    assert model.num_timesteps == 512
    venv.close()
    landers = make_sb3_vec_env("fx2d/Lander-v0", 8, seed=0, arch=ARCH, continuous=True)
    assert isinstance(landers, VecMonitor)
    model = PPO("MlpPolicy", landers, n_steps=64, batch_size=128, n_epochs=1, seed=0)
    model.learn(1024)
    assert len(model.ep_info_buffer) > 0  # landers crashed or landed, VecMonitor saw it
    landers.close()


#: The CartPole training test: PPO through the adapter, with RL Zoo's CartPole-v1 settings
#: (rl-baselines3-zoo, hyperparams/ppo.yml; 16 envs instead of 8 and 10 epochs instead of
#: 20, faster here). Every 5,000 env steps the deterministic policy plays 32 fresh episodes;
#: training stops when their mean return reaches 200 (a random policy's is 22) and must do
#: so within 60,000 steps.
TARGET, STEP_LIMIT, EVAL_EVERY = 200.0, 60_000, 5_000


def evaluate(model, env, seed=10_000):
    """The mean return of the deterministic policy over the first episode of each world."""
    obs, _ = env.reset(seed=seed)
    returns, running = np.zeros(env.num_envs), np.ones(env.num_envs, bool)
    while running.any():
        actions, _ = model.predict(obs, deterministic=True)
        obs, rewards, terminated, truncated, _ = env.step(actions)
        returns += np.where(running, rewards, 0.0)
        running &= ~(terminated | truncated)
    return returns.mean()


def train_cartpole(seed):
    """PPO on 16 cart-poles through make_sb3_vec_env until the evaluated mean return reaches
    TARGET or STEP_LIMIT steps: ([(env steps, evaluated mean return), ...], seconds)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from fx2d_gpu.envs.sb3 import make_sb3_vec_env

    eval_env = cartpoles(32)

    class EvaluateAndStop(BaseCallback):
        def __init__(self):
            super().__init__()
            self.curve = []

        def _on_step(self):
            if self.num_timesteps >= EVAL_EVERY * (len(self.curve) + 1):
                self.curve.append((self.num_timesteps, evaluate(self.model, eval_env)))
                return self.curve[-1][1] < TARGET  # False stops training
            return True

    venv = make_sb3_vec_env("fx2d/CartPole-v0", 16, seed=seed, arch=ARCH)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=256,
        n_epochs=10,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=lambda progress: 1e-3 * progress,  # linear to 0, as the zoo's
        clip_range=lambda progress: 0.2 * progress,
        seed=seed,
    )
    callback = EvaluateAndStop()
    start = time.perf_counter()
    model.learn(STEP_LIMIT, callback=callback)
    seconds = time.perf_counter() - start
    venv.close()
    eval_env.close()
    return callback.curve, seconds


def test_ppo_trains_the_cartpole_through_the_adapter(sb3):
    """Measured on a 2-core VM shared with other jobs (torch on one thread), seeds 0 to 15:
    the evaluated mean return reached 200 after 5,000 to 30,000 steps (seed 0: 299 at
    15,000), in 3 to 26 s. Trained on to 475 (spec.reward_threshold), every seed got there
    within 55,000 steps (median 25,000; seed 0: 35,000), in 14 to 70 s: the 200 asked here
    leaves a wide margin against other machines' floating point."""
    curve, seconds = train_cartpole(seed=0)
    print(f"PPO on fx2d/CartPole-v0: {[(s, round(float(r))) for s, r in curve]}, {seconds:.0f} s")
    assert curve[-1][1] >= TARGET and curve[-1][0] <= STEP_LIMIT, curve


def test_the_ppo_demo_runs_a_few_updates(capsys):
    """demos/ppo_cartpole.py (PyTorch only), two updates: it logs and plays the greedy
    policy (its training runs are measured in its docstring)."""
    pytest.importorskip("gymnasium", minversion="1.0")
    pytest.importorskip("torch", reason="the torch extra is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ppo_demo", ROOT / "demos" / "ppo_cartpole.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    mean_return = demo.main(["--arch", ARCH, "--total-steps", "1024", "--log-every", "512"])
    out = capsys.readouterr().out
    assert "cartpole: 16 envs, 2 updates of 512 steps" in out
    assert out.count("mean return (last 100 episodes)") == 2
    assert 8 <= mean_return <= 500  # CartPole's returns: at least 8 steps before a fall
