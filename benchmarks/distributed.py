"""World-steps per second of a ShardedScene (fx2d_gpu.distributed, Ray) beside one Scene.

    python -m benchmarks.distributed [--worlds 4096,16384,65536] [--quick] [--results DIR]

The scene is benchmarks' batched_small (8 bodies a world: a ground, a stack of 3 boxes, 3
thrown circles, a hinged rod; XPBD, 11 substeps, CPU backend), n worlds:

- in-process: one Scene of n worlds in this process, k step() calls.
- 1 and 2 shards: a ShardedScene of n worlds on a local Ray cluster of this machine's CPUs
  (one CPU per shard), step(dt, n=k) for k = 1, 4, 16 steps per round trip: ms per call.

The two take turns, a call each (this machine's speed drifts by +-30 % over minutes); each
row's ms are medians over those windows, and time_vs_in_process the median of the paired
ratios. Per shard count, a least-squares line
through (k, ms per call) splits a call into a per-call overhead (the round trip: Ray's
messages, the driver's bookkeeping) and a per-step cost; `steps_per_call_to_hide` is the
smallest k at which the overhead is at most 10 % of a call. `ping_ms` is one empty round trip
to every shard at once. `startup_s`: building the shards (actors start, import, compile or
load kernels from the offline cache, build the worlds). Saves
benchmarks/results/<device>/distributed.csv.
"""

import argparse
import datetime
import functools
import math
import os
import statistics
import time

import numpy as np

from fx2d_gpu import runtime, scenes

from .common import paired_ratio, print_table, save_csv, time_windows_side_by_side

WORLD_COUNTS = (4096, 16384, 65536)
QUICK_COUNTS = (1024, 4096)
STEPS_PER_CALL = (1, 4, 16)
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


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(overhead ms, ms per step): least squares of ms per call = overhead + k * per step."""
    k = np.array([p[0] for p in points], float)
    ms = np.array([p[1] for p in points], float)
    slope, intercept = np.polyfit(k, ms, 1)
    return max(float(intercept), 0.0), float(slope)


def run(world_counts, windows: int, results=None) -> list[dict]:
    import ray

    from fx2d_gpu.distributed import ShardedScene

    runtime.ensure_initialized("cpu")
    cpus = os.cpu_count() or 2
    if not ray.is_initialized():
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    builder = functools.partial(scenes.batched_small, seed=0, arch="cpu")
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    rows = []
    for n_worlds in world_counts:
        local = builder(n_worlds)
        bodies, substeps = local.n_bodies, local.substeps
        for n_shards in (1, 2):
            if n_shards > cpus:
                continue
            start = time.perf_counter()
            sharded = ShardedScene(n_worlds, builder, n_shards=n_shards, snapshot_every=None)
            startup = time.perf_counter() - start
            actors = [s.actor for s in sharded._shards]
            ping = _median_ms(lambda a=actors: ray.get([x.ping.remote() for x in a]),
                              windows, repeats=10)
            measured = []
            for k in STEPS_PER_CALL:
                # In turns, a call each (time_windows_side_by_side): this machine drifts.
                def in_process(k=k, scene=local):
                    for _ in range(k):
                        scene.step(DT)

                (_, local_ms), (_, sharded_ms) = time_windows_side_by_side(
                    [(in_process, lambda: None),
                     (lambda k=k, s=sharded: s.step(DT, n=k), lambda: None)], windows + 1, 1)
                measured.append((k, statistics.median(sharded_ms[1:]),
                                 statistics.median(local_ms[1:]),
                                 paired_ratio(sharded_ms, local_ms)))
            overhead, per_step = _fit([(k, ms) for k, ms, _, _ in measured])
            hide = max(1, math.ceil(9.0 * overhead / per_step)) if per_step > 0 else 1
            sharded.close()
            for k, ms, local_ms, ratio in measured:
                rows.append({
                    "date": stamp, "device": f"CPU, {cpus} cores", "backend": "x64",
                    "scene": "batched_small", "worlds": n_worlds, "bodies_per_world": bodies,
                    "substeps": substeps, "shards": n_shards, "steps_per_call": k,
                    "ms_per_call": round(ms, 2), "ms_per_step": round(ms / k, 2),
                    "world_steps_per_s": round(n_worlds * k / ms * 1000.0),
                    "in_process_ms_per_step": round(local_ms / k, 2),
                    "in_process_world_steps_per_s": round(n_worlds * k / local_ms * 1000.0),
                    "time_vs_in_process": round(ratio, 2),
                    "fit_overhead_ms": round(overhead, 2),
                    "fit_ms_per_step": round(per_step, 2),
                    "steps_per_call_to_hide": hide, "ping_ms": round(ping, 2),
                    "startup_s": round(startup, 1)})
            print(f"{n_worlds} worlds, {n_shards} shard(s): overhead {overhead:.1f} ms a call, "
                  f"{per_step:.1f} ms a step, ping {ping:.2f} ms; sharded/in-process "
                  f"{[round(m[3], 2) for m in measured]} at k = {STEPS_PER_CALL}", flush=True)
    path = save_csv("x64", "distributed", rows, results)
    print_table(rows)
    print(f"saved {path}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default=None,
                        help="comma-separated world counts (default 4096,16384,65536)")
    parser.add_argument("--quick", action="store_true", help="1024 and 4096 worlds, 3 windows")
    parser.add_argument("--results", default=None, help="results folder (default: the repo's)")
    args = parser.parse_args(argv)
    counts = (tuple(int(w) for w in args.worlds.split(",")) if args.worlds else
              QUICK_COUNTS if args.quick else WORLD_COUNTS)
    run(counts, windows=3 if args.quick else 5, results=args.results)


if __name__ == "__main__":
    main()
