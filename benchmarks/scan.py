"""The device prefix sum (fx2d_gpu/device/scan.py) on this device: its GPU passes (a thread a
number, _scan_on_gpu, since 2026-12-05) beside the CPU's blocked passes compiled for the same
device (a thread walks a block of SCAN_BLOCK numbers, loading one and storing its running
sum before the next, as a GPU's passes did before 2026-12-05; one thread then scans every
block sum, where those scanned them a chunk of 64 a thread first: past ~1M numbers the
CPU's passes cost a GPU more than its old ones did). Each is checked against NumPy's
cumulative sum first.

    python -m benchmarks.scan [--arch cuda] [--sizes N ...] [--repeats R] [--results DIR]

A small worlds' step scans three times (its pairs' ranges, its colour lists' counts, its
reported list), a pile's broad phase and colouring several times more; the sizes default to
65,536 and 196,608 (65,536 small worlds' pair counts and report flags), 1M and 4M (a 1M
pile's body slots and hash table). On a CPU backend the sizes stop at 1M (the GPU passes
add SCAN_BLOCK / 2 times the numbers there).

Saves benchmarks/results/<device>/scan.csv: passes ("gpu", "cpu"), numbers, milliseconds a
scan (the median of windows of `repeats` launches, each scanning the last one's sums again:
the timing does not read the values) and whether the sums matched NumPy's.
"""

import argparse
import datetime
import statistics

import numpy as np
import taichi as ti

from fx2d_gpu import device
from fx2d_gpu.device import SCAN_BLOCK, SCAN_CHUNK, runtime, scan

from .common import device_name, print_table, save_csv, time_windows

#: The sizes scanned by default (see the module docstring), and the most on a CPU backend.
SIZES = (65_536, 196_608, 1 << 20, 1 << 22)
CPU_MOST = 1 << 20


class Scratch:
    """device.ScanScratch's fields for scans of up to n numbers (made after Taichi starts)."""

    def __init__(self, n: int):
        n_blocks = n // SCAN_BLOCK + 2
        self.blocks = ti.field(ti.i32, n_blocks)
        self.chunks = ti.field(ti.i32, n_blocks // SCAN_CHUNK + 2)
        self.items = ti.field(ti.i32, n_blocks * SCAN_BLOCK)
        self.block_prefix = ti.field(ti.i32, n_blocks)


@ti.kernel
def _gpu_passes(scratch: ti.template(), data: ti.template(), n: ti.i32):
    scan.exclusive_scan(scratch, data, n, False)


@ti.kernel
def _cpu_passes(scratch: ti.template(), data: ti.template(), n: ti.i32):
    scan.exclusive_scan(scratch, data, n, False)


#: Each kernel, with the passes it compiles with (device.SCAN_PASSES, read at its first call).
KERNELS = {"gpu": _gpu_passes, "cpu": _cpu_passes}


def measure(passes: str, n: int, repeats: int, windows: int = 5) -> dict:
    """One row: `passes`' scan of n numbers, checked, then timed."""
    kernel = KERNELS[passes]
    data, scratch = ti.field(ti.i32, n + 1), Scratch(n)
    values = np.random.default_rng(n).integers(0, 16, n + 1).astype(np.int32)
    data.from_numpy(values)
    saved = device.SCAN_PASSES
    device.SCAN_PASSES = passes
    try:
        kernel(scratch, data, n)  # (compiles with `passes`)
    finally:
        device.SCAN_PASSES = saved
    expected = np.concatenate([[0], np.cumsum(values[:n])]).astype(np.int32)
    matches = bool(np.array_equal(data.to_numpy()[: n + 1], expected))
    _, times = time_windows(
        lambda: kernel(scratch, data, n), ti.sync, 1 + repeats * windows, repeats
    )
    return {
        "passes": passes,
        "numbers": n,
        "ms_per_scan": round(statistics.median(times), 4),
        "matches_numpy": matches,
    }


def run(arch="cuda", sizes=None, repeats=20, results=None) -> list[dict]:
    backend = runtime.ensure_initialized(arch)
    sizes = sizes or [n for n in SIZES if not runtime.on_cpu() or n <= CPU_MOST]
    base = {
        "date": datetime.date.today().isoformat(),
        "device": device_name(backend),
        "backend": backend,
    }
    rows = [{**base, **measure(passes, n, repeats)} for n in sizes for passes in KERNELS]
    print_table(rows)
    print("  saved", save_csv(backend, "scan", rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="cuda", help="cuda | vulkan | cpu | ... (default cuda)")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="numbers scanned")
    parser.add_argument("--repeats", type=int, default=20, help="launches a timed window (20)")
    parser.add_argument("--results", default=None, help="results folder")
    args = parser.parse_args(argv)
    run(args.arch, args.sizes, args.repeats, args.results)


if __name__ == "__main__":
    main()
