"""Shared benchmark helpers: device naming, timing, CSV output."""

import csv
import dataclasses
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import taichi as ti

from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.plan import DEFAULT_OPTIONS, StepOptions
from fx2d_gpu.physics.solver.team import TASK_ITEMS

RESULTS = Path(__file__).parent / "results"


#: Taichi's compile options a measurement may set (--taichi-option; handed to
#: runtime.ensure_initialized's taichi_options), and their kinds. The engine's own settings
#: are runtime.ensure_initialized's (each there with its reason):
#: advanced_optimization and fast_math off for a short cold compile and for bitwise
#: agreement between a scene's serial and parallel kernels; gpu_max_reg unset. (Taichi
#: bounds every CUDA kernel to its block in the PTX, which ptxas follows over a register
#: limit: the block sets the registers, StepOptions.gpu_world_block for the small worlds.)
TAICHI_OPTIONS = {"advanced_optimization": bool, "fast_math": bool, "gpu_max_reg": int}


def _name_values(pairs: list[str], kinds: dict) -> dict:
    """{name: value} from NAME=VALUE strings whose names and kinds (bool or int) `kinds`
    gives: bools as true/false, ints as whole numbers.

    Raises:
        ValueError: a name not in `kinds`, or a value not of its kind."""
    values = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        kind = kinds.get(name)
        if kind is bool and text.lower() in ("true", "false"):
            values[name] = text.lower() == "true"
        elif kind is int and text.lstrip("-").isdigit():
            values[name] = int(text)
        else:
            raise ValueError(
                f"{pair!r} is not NAME=VALUE of {sorted(kinds)} (bools true/false, counts as "
                "numbers)"
            )
    return values


def taichi_options(pairs: list[str]) -> dict:
    """{option: value} from NAME=VALUE strings of TAICHI_OPTIONS (bools as true/false).

    Raises:
        ValueError: a name not in TAICHI_OPTIONS, or a value not of its kind (a count
            below 0)."""
    options = _name_values(pairs, TAICHI_OPTIONS)
    counts = {name: value for name, value in options.items() if TAICHI_OPTIONS[name] is int}
    negative = [name for name, value in counts.items() if value < 0]
    if negative:
        raise ValueError(f"{negative} must be >= 0")
    return options


def parse_step_options(pairs: list[str]) -> dict:
    """{StepOptions attribute: value} from NAME=VALUE strings of its bool and int
    attributes, checked by StepOptions itself (ranges).

    Raises:
        ValueError: as _name_values, or StepOptions refuses the value."""
    kinds = {"bool": bool, "bool | None": bool, "int": int}
    fields = {
        f.name: kinds[str(f.type)] for f in dataclasses.fields(StepOptions) if str(f.type) in kinds
    }
    options = _name_values(pairs, fields)
    DEFAULT_OPTIONS.replace(**options)  # its own checks (ranges)
    return options


def options_suffix(options: dict) -> str:
    """What a CSV's name ends with for options {name: value} set on the command line:
    "_name-value" each, in order ("" for none)."""
    return "".join(f"_{name}-{value}" for name, value in options.items())


def add_option_arguments(parser, step_example: str):
    """--step-option and --taichi-option on `parser` (read back by parsed_options);
    `step_example`: what --step-option's help gives as an example."""
    parser.add_argument(
        "--step-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a StepOptions attribute of fx2d_gpu's scenes, e.g. {step_example}; repeatable",
    )
    parser.add_argument(
        "--taichi-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Taichi compile option over the engine's own, one of "
        f"{', '.join(sorted(TAICHI_OPTIONS))}, e.g. advanced_optimization=true; repeatable",
    )


def parsed_options(parser, args) -> tuple[dict, dict]:
    """(StepOptions values, Taichi options) of add_option_arguments' arguments, or the
    parser's error naming the argument."""
    try:
        step_options = parse_step_options(args.step_option)
    except ValueError as error:
        parser.error(f"--step-option: {error}")
    try:
        compile_options = taichi_options(args.taichi_option)
    except ValueError as error:
        parser.error(f"--taichi-option: {error}")
    return step_options, compile_options


def device_name(backend: str) -> str:
    """A short, file-system-safe name of the device the backend runs on; on a CPU backend
    limited to fewer threads (FX2D_CPU_THREADS, runtime.cpu_threads_setting) the count is
    part of it ("...-2cores-1thread"), so such runs keep their own results folder."""
    name = None
    if backend == "cuda":
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            name = out.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            name = "cuda-gpu"
    else:
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        name = f"{name or platform.processor() or 'cpu'}-{os.cpu_count()}cores"
        threads = runtime.cpu_threads_setting()
        if threads is not None and threads < (os.cpu_count() or 1):
            name += f"-{threads}thread{'' if threads == 1 else 's'}"
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip("_")


def time_windows(step, sync, steps: int, window: int) -> tuple[float, list[float]]:
    """Call step() `steps` times: (the first call in s, ms per call of each later window of
    `window` calls); sync() (the device sync) ends every timed stretch."""
    start = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - start
    times, done = [], 1
    while done < steps:
        n = min(window, steps - done)
        start = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        times.append((time.perf_counter() - start) * 1000.0 / n)
        done += n
    return first, times


#: Seconds every core is kept busy before each engine's window (wake_cores).
WAKE_S = 0.03
#: Spins of one _spin_cores task: calibrated by wake_cores's first call to ~WAKE_S.
_wake = {"spins": 0}


@ti.kernel
def _spin_cores(spins: ti.i32, out: ti.types.ndarray()):
    """One busy task per CPU thread of Taichi's pool (out: one entry a thread; a task of
    team.TASK_ITEMS items runs on one thread), each spinning `spins` times."""
    for item in range(out.shape[0] * TASK_ITEMS):
        if item % TASK_ITEMS == 0:
            x = 0.0
            for _ in range(spins):
                x = x * 0.5 + 1.0
            out[item // TASK_ITEMS] = x


def wake_cores(seconds: float = WAKE_S):
    """On a CPU backend, keep every thread of Taichi's pool busy for about `seconds`
    (untimed), so that an engine on several threads does not start its window on cores the
    engine before it left idle. On the 2-core cloud machine, after ~0.1 s of one core idle
    (a window of a single-threaded engine: pymunk, Box2D on 1 thread) the large pyramid's
    first steps took 28, 17, 20 and 15 ms against 6 (its team of threads waits at every
    barrier for the thread that is slow to come back), for 5 steps of Box2D's; after 30 ms
    of both cores busy, 6.6 and 6.1. (Threads of Python's own that hash data to keep the
    cores busy did not help: it is Taichi's pool that must be running.) On a GPU backend
    nothing (the CPU threads there are Box2D's)."""
    if not runtime.on_cpu():
        return
    out = np.zeros(runtime.cpu_threads_setting() or os.cpu_count() or 1, np.float32)
    if _wake["spins"] == 0:
        _spin_cores(1_000_000, out)
        start = time.perf_counter()
        _spin_cores(1_000_000, out)
        took = time.perf_counter() - start
        _wake["spins"] = max(int(1_000_000 * seconds / max(took, 1e-6)), 1)
    _spin_cores(_wake["spins"], out)


def time_windows_side_by_side(runs, steps: int, window: int) -> list[tuple[float, list[float]]]:
    """time_windows for several engines at once: runs = [(step, sync), ...]. Each takes its
    first call, then the engines take turns, a window of `window` calls each (the engine
    that starts a round changes from round to round), so that every engine's window k ran
    within seconds of the others': this machine's speed drifts by +-30 % over minutes, and
    a ratio of two runs made minutes apart measures the drift as much as the engines. Every
    window starts after wake_cores (untimed), as if each engine ran alone and kept the
    machine busy. Returns [(first call s, [ms per call of each window])] in the order of
    `runs`."""
    firsts, times = [], [[] for _ in runs]
    for step, sync in runs:
        start = time.perf_counter()
        step()
        sync()
        firsts.append(time.perf_counter() - start)
    done, round_index = 1, 0
    while done < steps:
        n = min(window, steps - done)
        for offset in range(len(runs)):
            i = (round_index + offset) % len(runs)
            step, sync = runs[i]
            wake_cores()
            start = time.perf_counter()
            for _ in range(n):
                step()
            sync()
            times[i].append((time.perf_counter() - start) * 1000.0 / n)
        done += n
        round_index += 1
    return list(zip(firsts, times, strict=True))


def paired_ratio(times: list[float], reference: list[float]) -> float:
    """The median over windows of times[k] / reference[k] (windows run side by side,
    time_windows_side_by_side), the warm-up window left out as in the suite's medians."""
    ratios = [a / b for a, b in zip(times[1:] or times, reference[1:] or reference, strict=True)]
    return statistics.median(ratios)


def timed(fn, repeats: int, windows: int = 5) -> float:
    """Median over `windows` of the mean time (ms) of `repeats` calls after a first call."""
    return statistics.median(time_windows(fn, ti.sync, 1 + repeats * windows, repeats)[1])


def save_csv(backend: str, name: str, rows: list[dict], results=None, device: str | None = None):
    """rows written to <results>/<device>/<name>.csv; device: the backend's device_name
    unless given."""
    folder = Path(results or RESULTS) / (device or device_name(backend))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def print_table(rows: list[dict]):
    keys = list(rows[0])
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[k]).rjust(w) for k, w in zip(keys, widths, strict=True)))
