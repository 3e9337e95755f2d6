"""What a team's meeting costs on this device with no work around it: the barrier a team's
stages meet at (solver/team.py: on CUDA a block's barrier, or a grid team's round trip of
its blocks' first threads through the L2 cache; on a CPU the team's threads at a counter),
a token handed on from member to member (what a colour pass by turns pays for each
constraint that waits for another: StepOptions.colors_by_turns), and a barrier after which
every member reads one number the team tallied, as an atomic (`atomic_add(x, 0)`, the
team's reads before 2026-12-05: on a grid team 33,792 atomics on one address) or as a
plain read (team.barrier's rule since).

    python -m benchmarks.grid_sync [--arch cuda] [--rounds R] [--results DIR]

A team's step is its stages' work and these meetings: the large pyramid's kept step meets
86 times (soft step) to 208 (XPBD) (python -m benchmarks.launches), and on the H200 its
grid team took 1.62 and 2.40 ms a step (7.7-10.4 us a barrier with the work between). This
says how much of that is the meeting itself. Teams measured: on CUDA one block
(gpu_team.BLOCK_THREADS threads) and grid teams of 2, 8, 32 blocks and one a
multiprocessor (the default); elsewhere the CPU team's threads. The token goes round the
team's blocks' first threads (a grid team), its warps' first threads (one block), or its
threads (a CPU), `rounds` times.

Saves benchmarks/results/<device>/grid_sync.csv: members, blocks, microseconds a barrier,
handoffs and microseconds a handoff, microseconds a barrier and every member's atomic read
(`atomic_read_us`) or plain read (`plain_read_us`) after it, and the waits that ran out (a
grid team whose blocks were not all resident: its figures mean nothing).
"""

import argparse
import datetime

import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver import gpu_team, team

from .common import device_name, print_table, save_csv, time_windows

#: Where the token lies (a field of its own: the team's counters are the barrier's).
_token = None


@ti.kernel
def _meet(counts: ti.template(), n_members: ti.i32, rounds: ti.i32):
    """`rounds` of the team's barriers, nothing between them."""
    stride = team.items_per_member(n_members)
    if ti.static(gpu_team.on_gpu()):
        ti.loop_config(block_dim=gpu_team.BLOCK_THREADS)
    for item in range(n_members * stride):
        if team.member_of(item, stride) >= 0:
            for _ in range(rounds):
                team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.kernel
def _meet_and_read(
    counts: ti.template(),
    token: ti.template(),
    n_members: ti.i32,
    rounds: ti.i32,
    atomic: ti.template(),
):
    """`rounds` of the team's barriers, every member reading token[0] after each (an atomic
    read or a plain one); what they read is summed and written where nothing reads it
    (token[1]: the reads are not left out)."""
    stride = team.items_per_member(n_members)
    if ti.static(gpu_team.on_gpu()):
        ti.loop_config(block_dim=gpu_team.BLOCK_THREADS)
    for item in range(n_members * stride):
        if team.member_of(item, stride) >= 0:
            seen = 0
            for _ in range(rounds):
                team.barrier(counts, n_members, team.SPIN_LIMIT)
                if ti.static(atomic):
                    seen += ti.atomic_add(token[0], 0)
                else:
                    seen += token[0]
            if seen < 0:
                token[1] = seen


@ti.kernel
def _hand_on(
    counts: ti.template(), token: ti.template(), n_members: ti.i32, spacing: ti.i32, rounds: ti.i32
):
    """The token round the holders (every `spacing`-th member) `rounds` times: holder h
    waits for it (token == round * holders + h, as a turn waits: team.wait_while), fences
    and passes it on."""
    stride = team.items_per_member(n_members)
    holders = n_members // spacing
    if ti.static(gpu_team.on_gpu()):
        ti.loop_config(block_dim=gpu_team.BLOCK_THREADS)
    for item in range(n_members * stride):
        member = team.member_of(item, stride)
        if member >= 0 and member % spacing == 0:
            holder = member // spacing
            for r in range(rounds):
                team.wait_while(counts, token, 0, r * holders + holder, False, team.SPIN_LIMIT)
                if ti.static(gpu_team.on_cuda()):
                    ti.simt.grid.memfence()
                ti.atomic_add(token[0], 1)


def teams(backend: str) -> list[tuple[int, int]]:
    """(members, blocks) of the teams measured on `backend` (blocks 0: a CPU team)."""
    if backend == "cuda":
        most = gpu_team.grid_blocks(0)
        return [(b * gpu_team.BLOCK_THREADS, b) for b in sorted({1, 2, 8, 32, most}) if b <= most]
    if backend in ("x64", "arm64"):
        return [(team.usable_threads(), 0)]
    return [(gpu_team.BLOCK_THREADS, 1)]  # one workgroup on Vulkan or Metal


def measure(counts, members: int, blocks: int, rounds: int) -> dict:
    """One team's row: microseconds a barrier and a handoff (best of three runs after a
    first, which compiles)."""
    global _token
    if _token is None:
        _token = ti.field(ti.i32, 2)
    team.clear_barriers(counts)
    if blocks > 1:
        spacing = gpu_team.BLOCK_THREADS
    elif blocks == 1:
        spacing = 32  # a warp's first thread
    else:
        spacing = 1
    holders = members // spacing

    def meet():
        _meet(counts, members, rounds)

    def hand_on():
        _token[0] = 0
        _hand_on(counts, _token, members, spacing, rounds)

    def read(atomic):
        return lambda: _meet_and_read(counts, _token, members, rounds, atomic)

    # A first call (it compiles), then eight timed one at a time: the best (ms; a
    # descheduled thread of a CPU team stalls a whole run).
    barrier_ms = min(time_windows(meet, ti.sync, 9, 1)[1])
    handoff_ms = min(time_windows(hand_on, ti.sync, 9, 1)[1])
    atomic_ms = min(time_windows(read(True), ti.sync, 9, 1)[1])
    plain_ms = min(time_windows(read(False), ti.sync, 9, 1)[1])
    if _token[0] != rounds * holders:  # every holder passed it on every round
        raise RuntimeError(f"the token was passed {_token[0]} times, not {rounds * holders}")
    return {
        "members": members,
        "blocks": blocks,
        "rounds": rounds,
        "barrier_us": round(1e3 * barrier_ms / rounds, 3),
        "handoffs": rounds * holders,
        "handoff_us": round(1e3 * handoff_ms / (rounds * holders), 3),
        "atomic_read_us": round(1e3 * atomic_ms / rounds, 3),
        "plain_read_us": round(1e3 * plain_ms / rounds, 3),
        "timeouts": int(counts.barrier[team.TIMEOUTS]),
    }


def run(arch: str, rounds: int, results=None) -> list[dict]:
    backend = runtime.ensure_initialized(arch)
    scene = scenes.pyramid(2, arch=arch)  # a pool, for the team's counters
    counts = scene.step_context().pool.counts
    date = datetime.date.today().isoformat()
    device = device_name(backend)
    rows = [
        {"date": date, "device": device, "backend": backend, **measure(counts, m, b, rounds)}
        for m, b in teams(backend)
    ]
    print_table(rows)
    print("  saved", save_csv(backend, "grid_sync", rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grid_sync", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--arch", default="cuda")
    parser.add_argument("--rounds", type=int, default=2000, help="barriers a run (2,000)")
    parser.add_argument("--results", default=None, help="results folder")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    run(args.arch, args.rounds, args.results)


if __name__ == "__main__":
    main()
