"""World-steps per second of a ShardedScene (fx2d_gpu.distributed, Ray) beside one Scene.

    python -m benchmarks.distributed [--worlds 4096,16384,65536] [--quick] [--results DIR]

The scene is benchmarks' batched_small (8 bodies a world: a ground, a stack of 3 boxes, 3
thrown circles, a hinged rod; XPBD, 11 substeps, CPU backend), n worlds:

- in-process: one Scene of n worlds in this process, k step() calls;
- 1 and 2 shards: a ShardedScene of n worlds on a local Ray cluster of this machine's CPUs,
  divided among the shards (each runs as many Taichi threads as it was given CPUs), and
  step(dt, n=k): k steps in one round trip per shard.

Each is timed alone (the in-process scene before any shard starts: beside busy processes on
its cores, an in-process CPU team falls back to one thread), the median over windows of a
call; `time_vs_in_process` is the ratio of the two medians (this machine drifts by +-30 %
over minutes: compare rows of one run). The per-call overhead (Ray's messages, the driver's
bookkeeping, waking the actor) is measured apart on 64 worlds, where a step is short and
the machine's drift small: the median over 40 paired windows of (sharded step(dt, n=1))
- (one in-process step);
`steps_per_call_to_hide` is then the smallest k at which that overhead is at most 10 % of a
call of k steps of n worlds. `ping_ms`: one empty round trip to every shard at once.
`startup_s`: building the shards (actors start, import, load kernels from the offline
cache, build the worlds). Saves benchmarks/results/<device>/distributed.csv.
"""

import argparse
import datetime
import functools
import math
import os
import statistics
import time

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime

from .common import print_table, save_csv, time_windows_side_by_side

WORLD_COUNTS = (4096, 16384, 65536)
QUICK_COUNTS = (1024, 4096)
STEPS_PER_CALL = (1, 8)
OVERHEAD_WORLDS, OVERHEAD_WINDOWS = 64, 40
DT = 1.0 / 60.0


def _median_ms(call, windows: int, repeats: int = 1) -> float:
    """Median over `windows` of the mean ms of `repeats` calls, after one untimed call."""
    call()
    times = []
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        times.append((time.perf_counter() - start) * 1000.0 / repeats)
    return statistics.median(times)


def _side_by_side(local, sharded, k: int, windows: int) -> tuple[list, list]:
    """(in-process ms, sharded ms) of each window: k local steps, then step(dt, n=k), in
    turns (time_windows_side_by_side), the warm-up call left out."""

    def in_process():
        for _ in range(k):
            local.step(DT)

    (_, local_ms), (_, sharded_ms) = time_windows_side_by_side(
        [(in_process, lambda: None), (lambda: sharded.step(DT, n=k), lambda: None)], windows + 1, 1
    )
    return local_ms, sharded_ms


def _overhead_ms(builder, n_shards: int) -> float:
    """Per-call overhead, ms: median of paired (sharded one step) - (in-process one step)
    on OVERHEAD_WORLDS worlds."""
    from fx2d_gpu.distributed import ShardedScene

    local = builder(OVERHEAD_WORLDS)
    with ShardedScene(
        OVERHEAD_WORLDS,
        builder,
        n_shards=n_shards,
        snapshot_every=None,
        shard_options={"num_cpus": (os.cpu_count() or 2) / n_shards},
    ) as sharded:
        local_ms, sharded_ms = _side_by_side(local, sharded, 1, OVERHEAD_WINDOWS)
    return statistics.median(s - t for s, t in zip(sharded_ms, local_ms, strict=True))


def run(world_counts, windows: int, results=None) -> list[dict]:
    import ray

    from fx2d_gpu.distributed import ShardedScene

    runtime.ensure_initialized("cpu")
    cpus = os.cpu_count() or 2
    if not ray.is_initialized():
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    builder = functools.partial(scenes.batched_small, seed=0, arch="cpu")
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    shard_counts = [n for n in (1, 2) if n <= cpus]
    overheads = {n: _overhead_ms(builder, n) for n in shard_counts}
    rows = []
    for n_worlds in world_counts:
        local = builder(n_worlds)
        bodies, substeps = local.n_bodies, local.substeps
        # Alone, before any shard exists: beside busy processes on the same cores, the
        # CPU team of an in-process scene may find its threads not running at once and
        # fall back to one (docs/backends.md), which would flatter the shards.
        local_ms = {
            k: _median_ms(lambda k=k, scene=local: [scene.step(DT) for _ in range(k)], windows)
            for k in STEPS_PER_CALL
        }
        for n_shards in shard_counts:
            start = time.perf_counter()
            sharded = ShardedScene(
                n_worlds,
                builder,
                n_shards=n_shards,
                snapshot_every=None,
                shard_options={"num_cpus": cpus / n_shards},
            )
            startup = time.perf_counter() - start
            actors = [s.actor for s in sharded._shards]
            ping = _median_ms(
                lambda a=actors: ray.get([x.ping.remote() for x in a]), windows, repeats=10
            )
            for k in STEPS_PER_CALL:
                ms = _median_ms(lambda k=k, s=sharded: s.step(DT, n=k), windows)
                per_step = local_ms[k] / k
                overhead = overheads[n_shards]
                rows.append(
                    {
                        "date": stamp,
                        "device": f"CPU, {cpus} cores",
                        "backend": "x64",
                        "scene": "batched_small",
                        "worlds": n_worlds,
                        "bodies_per_world": bodies,
                        "substeps": substeps,
                        "shards": n_shards,
                        "steps_per_call": k,
                        "ms_per_call": round(ms, 2),
                        "ms_per_step": round(ms / k, 2),
                        "world_steps_per_s": round(n_worlds * k / ms * 1000.0),
                        "in_process_ms_per_step": round(per_step, 2),
                        "in_process_world_steps_per_s": round(n_worlds / per_step * 1000.0),
                        "time_vs_in_process": round(ms / local_ms[k], 2),
                        "overhead_ms_per_call": round(overhead, 2),
                        "steps_per_call_to_hide": max(1, math.ceil(9.0 * overhead / per_step)),
                        "ping_ms": round(ping, 2),
                        "startup_s": round(startup, 1),
                    }
                )
                print(
                    f"{n_worlds} worlds, {n_shards} shard(s), {k} steps a call: "
                    f"{ms:.1f} ms (in-process {local_ms[k]:.1f}), overhead "
                    f"{overhead:.2f} ms, ping {ping:.2f} ms",
                    flush=True,
                )
            sharded.close()
    path = save_csv("x64", "distributed", rows, results)
    print_table(rows)
    print(f"saved {path}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--worlds", default=None, help="comma-separated world counts (default 4096,16384,65536)"
    )
    parser.add_argument("--quick", action="store_true", help="1024 and 4096 worlds, 3 windows")
    parser.add_argument("--results", default=None, help="results folder (default: the repo's)")
    args = parser.parse_args(argv)
    counts = (
        tuple(int(w) for w in args.worlds.split(","))
        if args.worlds
        else QUICK_COUNTS
        if args.quick
        else WORLD_COUNTS
    )
    run(counts, windows=3 if args.quick else 5, results=args.results)


if __name__ == "__main__":
    main()
