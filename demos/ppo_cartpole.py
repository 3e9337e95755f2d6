"""PPO on fx2d_gpu's vector environments, in one file of plain PyTorch (CleanRL-style).

    python demos/ppo_cartpole.py                    # fx2d/CartPole-v0 to a return of 475+
    python demos/ppo_cartpole.py --task lander      # fx2d/Lander-v0: the return rises
    python demos/ppo_cartpole.py --help             # the settings

Needs PyTorch and Gymnasium (`pip install "fx2d_gpu[rl,torch]"`; for the CPU build of
PyTorch, `pip install torch --index-url https://download.pytorch.org/whl/cpu`).

The environment is one `CartPoleVectorEnv` / `LanderVectorEnv`: every sub-environment a
world of one scene, all stepped by one `step()`. It runs in Gymnasium's SAME_STEP autoreset
mode, so that the observation after an episode's end is the next episode's first, and the
last one is in `infos["final_obs"]`: a truncated episode (CartPole's 500 steps, the lander's
1,000) is bootstrapped from the value of that final observation rather than counted as a
failure. The policy and the value function are two small MLPs (tanh), as CleanRL's
ppo.py; advantages by GAE, the clipped surrogate loss, a learning rate annealed to 0.

The settings per task (TASKS below; any can be changed on the command line):

- cartpole: RL Zoo's CartPole-v1 settings (rl-baselines3-zoo, hyperparams/ppo.yml): 16
  envs x 32 steps a rollout, 10 epochs of minibatches of 256, gamma 0.98, lambda 0.8, no
  entropy bonus, learning rate 1e-3 and clip 0.2 both annealed to 0, 100,000 steps.
- lander: RL Zoo's LunarLander-v3 gamma 0.999, lambda 0.98, 4 epochs and entropy 0.01,
  with shorter rollouts and larger minibatches (32 envs x 128 steps, 4,096 a rollout, in
  minibatches of 512), learning rate 3e-4 annealed to 0, and normalisation: observations
  by their running mean and variance, rewards divided by the running standard deviation of
  the discounted return. Without the normalisation the return rose much more slowly
  (below). In the run below the greedy policy passed the threshold of 200
  (spec.reward_threshold, LunarLander's) after the default million steps.

Measured on a 2-core virtual machine shared with other jobs (Taichi on the CPU backend,
PyTorch on one thread: --threads; two threads made PPO 4 times slower there, the two
thread pools fighting for the cores), seed 0, `--arch cpu`; the mean return of the last 100
training episodes (the sampling policy's) by env steps:

- cartpole: 80 at 10k, 132 at 20k, 240 at 40k, 319 at 60k, 396 at 90k, 437 at 100k, in
  86 s; then the greedy policy returned 500.0 in each of 16 episodes.
- lander: -269 at 50k, -230 at 100k, -104 at 200k, -10 at 300k, 86 at 400k, 129 at
  500k, 157 at 700k, 159 at 1M, in 538 s; then the greedy policy averaged 230.6 over 32
  episodes.
- lander with --normalize 0: -282 at 50k, -272 at 200k, -261 at 300k, -212 at 400k,
  -182 at 500k, -162 at 650k (stopped there, 217 s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

TASK_IDS = {"cartpole": "fx2d/CartPole-v0", "lander": "fx2d/Lander-v0"}
TASKS = {
    "cartpole": dict(
        num_envs=16,
        num_steps=32,
        total_steps=100_000,
        learning_rate=1e-3,
        epochs=10,
        minibatch_size=256,
        gamma=0.98,
        gae_lambda=0.8,
        clip=0.2,
        anneal_clip=True,
        entropy=0.0,
        normalize=False,
    ),
    "lander": dict(
        num_envs=32,
        num_steps=128,
        total_steps=1_000_000,
        learning_rate=3e-4,
        epochs=4,
        minibatch_size=512,
        gamma=0.999,
        gae_lambda=0.98,
        clip=0.2,
        anneal_clip=False,
        entropy=0.01,
        normalize=True,
    ),
}


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="cartpole")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arch", default="auto", help="Taichi backend: auto, cpu, cuda, ...")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's CPU threads")
    parser.add_argument("--log-every", type=int, default=10_000, help="env steps between lines")
    parser.add_argument(
        "--stop-at", type=float, default=None, help="stop when the mean return reaches it"
    )
    for name, value in TASKS["cartpole"].items():  # None: the task's value
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, type=int, choices=(0, 1), default=None)
        else:
            parser.add_argument(flag, type=type(value), default=None)
    args = parser.parse_args(argv)
    for name, value in TASKS[args.task].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


class RunningMeanStd:
    """A running mean and variance (Welford's parallel update), for normalisation."""

    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, batch: np.ndarray) -> None:
        mean, var, count = batch.mean(axis=0), batch.var(axis=0), len(batch)
        delta, total = mean - self.mean, self.count + count
        self.mean = self.mean + delta * count / total
        self.var = (self.var * self.count + var * count + delta**2 * self.count * count / total) / (
            total
        )
        self.count = total


def main(argv=None) -> float:
    """Train; returns the final greedy policy's mean return over num_envs episodes."""
    args = parse_arguments(argv)
    import torch
    from torch import nn

    import fx2d_gpu.envs as fx_envs

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    task = {"cartpole": fx_envs.CartPoleVectorEnv, "lander": fx_envs.LanderVectorEnv}[args.task]
    envs = task(args.num_envs, arch=args.arch, autoreset_mode="SameStep")
    n, obs_dim = envs.num_envs, envs.single_observation_space.shape[0]
    n_actions = envs.single_action_space.n

    def mlp(out, std):
        layers = [nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh()]
        layers.append(nn.Linear(64, out))
        for layer in layers[::2]:  # CleanRL's orthogonal initialisation
            nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not layers[-1] else std)
            nn.init.zeros_(layer.bias)
        return nn.Sequential(*layers)

    actor, critic = mlp(n_actions, 0.01), mlp(1, 1.0)
    parameters = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=args.learning_rate, eps=1e-5)
    obs_stats = RunningMeanStd((obs_dim,))
    return_stats, discounted = RunningMeanStd(), np.zeros(n)

    def normalized(obs: np.ndarray) -> torch.Tensor:
        if args.normalize:
            obs = np.clip((obs - obs_stats.mean) / np.sqrt(obs_stats.var + 1e-8), -10, 10)
        return torch.as_tensor(obs, dtype=torch.float32)

    batch = n * args.num_steps
    updates = max(1, args.total_steps // batch)
    buffers = {
        "obs": torch.zeros((args.num_steps, n, obs_dim)),
        "actions": torch.zeros((args.num_steps, n), dtype=torch.long),
        "log_probs": torch.zeros((args.num_steps, n)),
        "rewards": torch.zeros((args.num_steps, n)),
        "dones": torch.zeros((args.num_steps, n)),
        "values": torch.zeros((args.num_steps, n)),
    }
    obs, _ = envs.reset(seed=args.seed)
    if args.normalize:
        obs_stats.update(obs)
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    finished: list[float] = []  # the returns of finished episodes (for the log)
    start, steps, next_log = time.perf_counter(), 0, args.log_every
    print(f"{args.task}: {n} envs, {updates} updates of {batch} steps")
    for update in range(updates):
        optimizer.param_groups[0]["lr"] = args.learning_rate * (1 - update / updates)
        clip = args.clip * (1 - update / updates) if args.anneal_clip else args.clip
        for t in range(args.num_steps):
            x = normalized(obs)
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=actor(x))
                action = dist.sample()
                buffers["values"][t] = critic(x).squeeze(-1)
            buffers["obs"][t], buffers["actions"][t] = x, action
            buffers["log_probs"][t] = dist.log_prob(action)
            obs, rewards, terminated, truncated, infos = envs.step(action.numpy())
            returns += rewards
            lengths += 1
            ended = terminated | truncated
            finished.extend(returns[ended])
            returns[ended], lengths[ended] = 0.0, 0
            if args.normalize:  # rewards over the running std of the discounted return
                discounted = discounted * args.gamma + rewards
                return_stats.update(discounted)
                discounted[ended] = 0.0
                rewards = rewards / np.sqrt(return_stats.var + 1e-8)
                obs_stats.update(obs)
            rewards = np.asarray(rewards, np.float64).copy()
            timeout = truncated & ~terminated
            if timeout.any():  # bootstrap a truncated episode from its final observation
                final = np.stack([infos["final_obs"][i] for i in np.flatnonzero(timeout)])
                with torch.no_grad():
                    value = critic(normalized(final)).squeeze(-1).numpy()
                rewards[timeout] += args.gamma * value
            buffers["rewards"][t] = torch.as_tensor(rewards, dtype=torch.float32)
            buffers["dones"][t] = torch.as_tensor(ended, dtype=torch.float32)
        steps += batch

        # GAE: dones[t] says whether the episode ended at step t (obs t + 1 is a new one).
        with torch.no_grad():
            next_value = critic(normalized(obs)).squeeze(-1)
        advantages = torch.zeros_like(buffers["rewards"])
        last = torch.zeros(n)
        for t in reversed(range(args.num_steps)):
            following = next_value if t == args.num_steps - 1 else buffers["values"][t + 1]
            alive = 1.0 - buffers["dones"][t]
            delta = buffers["rewards"][t] + args.gamma * following * alive - buffers["values"][t]
            last = delta + args.gamma * args.gae_lambda * alive * last
            advantages[t] = last
        targets = advantages + buffers["values"]

        flat = {k: v.reshape(batch, *v.shape[2:]) for k, v in buffers.items()}
        flat_advantages, flat_targets = advantages.reshape(batch), targets.reshape(batch)
        for _ in range(args.epochs):
            order = torch.randperm(batch)
            for first in range(0, batch, args.minibatch_size):
                mb = order[first : first + args.minibatch_size]
                dist = torch.distributions.Categorical(logits=actor(flat["obs"][mb]))
                ratio = (dist.log_prob(flat["actions"][mb]) - flat["log_probs"][mb]).exp()
                adv = flat_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
                value_loss = 0.5 * ((critic(flat["obs"][mb]).squeeze(-1) - flat_targets[mb]) ** 2)
                loss = policy_loss + 0.5 * value_loss.mean() - args.entropy * dist.entropy().mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(parameters, 0.5)
                optimizer.step()

        recent = float(np.mean(finished[-100:])) if finished else float("nan")
        if steps >= next_log or update == updates - 1:
            next_log += args.log_every
            print(
                f"steps {steps:8d}  mean return (last 100 episodes) {recent:8.1f}  "
                f"episodes {len(finished):6d}  {time.perf_counter() - start:6.0f} s",
                flush=True,
            )
        if args.stop_at is not None and len(finished) >= 100 and recent >= args.stop_at:
            break

    # The greedy policy, one fresh episode per world.
    obs, _ = envs.reset(seed=args.seed + 1_000_000)
    total, running = np.zeros(n), np.ones(n, bool)
    while running.any():
        with torch.no_grad():
            action = actor(normalized(obs)).argmax(-1).numpy()
        obs, rewards, terminated, truncated, _ = envs.step(action)
        total += np.where(running, rewards, 0.0)
        running &= ~(terminated | truncated)
    threshold = fx_envs.REWARD_THRESHOLDS[TASK_IDS[args.task]]
    print(
        f"greedy policy: mean return {total.mean():.1f} over {n} episodes "
        f"(spec.reward_threshold: {threshold:g})"
    )
    envs.close()
    return float(total.mean())


if __name__ == "__main__":
    main()
