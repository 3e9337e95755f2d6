"""Box2D v3's own `benchmark` program, built natively, beside fx2d_gpu's pyramids (issue 77).

The suite's other Box2D v3 column (box2d_scenes) steps Box2D through pyb2d3, a Python
binding whose build runs 1.6-2x slower than the library built from Box2D's repository, so
a ratio against it flatters fx2d_gpu. This runs the library's own benchmark program, which
the user builds (Box2D's code is not part of this repository) as its README says:

    git clone https://github.com/erincatto/box2d && cd box2d
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBOX2D_BENCHMARKS=ON \\
          -DBOX2D_SAMPLES=OFF -DBOX2D_UNIT_TESTS=OFF
    cmake --build build --target benchmark
    python -m benchmarks --box2d-benchmark build/bin/benchmark large_pyramid many_pyramids

(or FX2D_BOX2D_BENCHMARK=build/bin/benchmark). Its protocol (benchmark/main.c): each run
builds the scene in a fresh world, takes one untimed step, then times the other steps
together (dt 1/60 s, 4 substeps, sleep off, continuous collision on; 500 steps for the
large pyramid, 200 for many pyramids); the best of `repeats` runs. Its scenes are the
suite's: the large pyramid 5,050 boxes on a ground (5,051 bodies), many pyramids 20 x 20
pyramids of base 10 (22,000 boxes; its 20 grounds are segments of one static body, so it
counts 22,001 bodies where fx2d_gpu counts 22,020). Sleep off, so its rows compare with
fx2d_gpu's "(no sleep)" runs. It runs on its own after fx2d_gpu's runs, not window by
window beside them as pyb2d3 does: on a machine whose speed drifts, its ratio is of two
moments, and the best of its runs against fx2d_gpu's median.

Box2D's program prints, per invocation (one scene, one worker count):

    benchmark: large_pyramid, steps = 500
    thread count: 2
    run 0 : 2412.5 (ms)          <- the timed steps' total, steps - 1 of them
    ...
    body 5051 / shape 5051 / contact 14950 / joint 0 / stack 3919584

and writes <scene>.csv (threads,ms: the best run) into its working folder, here a
temporary one that is then removed.
"""

import os
import re
import subprocess
import tempfile
from pathlib import Path

#: The environment variable `python -m benchmarks` reads the program's path from when
#: --box2d-benchmark is not given.
ENV_VAR = "FX2D_BOX2D_BENCHMARK"
#: The suite's scenes that Box2D's program has too, under the same names.
SCENES = ("large_pyramid", "many_pyramids")
#: Box2D worker counts run (its b2WorldDef.workerCount; 1 runs on the calling thread).
WORKERS = (1, 2)
#: Runs per scene and worker count, the best kept (Box2D's own default).
REPEATS = 4
#: Box2D's substeps a step in its benchmark program (b2World_Step's subStepCount).
SUBSTEPS = 4
#: Seconds one invocation may take: 4 runs of many pyramids take ~40 s on a 2-core VM.
TIMEOUT_S = 1800

_SCENE = re.compile(r"^benchmark: (\S+), steps = (\d+)\s*$", re.MULTILINE)
_WORKERS = re.compile(r"^thread count: (\d+)\s*$", re.MULTILINE)
_RUN = re.compile(r"^run (\d+) : ([-+0-9.eE]+) \(ms\)\s*$", re.MULTILINE)
_COUNTS = re.compile(r"^body (\d+) / shape (\d+) / contact (\d+) / joint (\d+)", re.MULTILINE)


class NativeBenchmarkError(RuntimeError):
    """Box2D's program is missing, failed or printed something this cannot read; the
    message says which, in one line."""


def engine_name(workers: int) -> str:
    """The suite's engine column: "box2d native (1 worker)", "box2d native (2 workers)"."""
    return f"box2d native ({workers} worker{'' if workers == 1 else 's'})"


def ratio_column(workers: int) -> str:
    """fx2d_gpu's column of its time over the native program's at `workers` workers."""
    return f"ratio_to_box2d_native_{workers}_worker{'' if workers == 1 else 's'}"


def program_path(given: str | os.PathLike | None, environ=os.environ) -> Path | None:
    """The program's path: `given` (--box2d-benchmark), else $FX2D_BOX2D_BENCHMARK, else
    None."""
    value = given if given else environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


def check_program(path: str | os.PathLike) -> Path:
    """`path` as an absolute Path, if it is an executable file; NativeBenchmarkError if not."""
    path = Path(path).expanduser()
    if not path.exists():
        raise NativeBenchmarkError(
            f"{path} does not exist (build Box2D's benchmark program: "
            "cmake -DBOX2D_BENCHMARKS=ON, see benchmarks/box2d_native.py)"
        )
    if not path.is_file() or not os.access(path, os.X_OK):
        raise NativeBenchmarkError(f"{path} is not an executable file")
    return path.resolve()


def parse_output(text: str) -> dict:
    """What one invocation of Box2D's program printed (one scene, one worker count):
    {"scene", "steps" (steps a run, the first untimed), "workers", "runs_ms" (each run's
    timed steps in total, ms), "bodies", "shapes", "contacts", "joints"}."""
    scene = _SCENE.findall(text)
    workers = _WORKERS.findall(text)
    runs = _RUN.findall(text)
    counts = _COUNTS.search(text)
    if len(scene) != 1 or len(workers) != 1 or not runs or counts is None:
        last = text.strip().splitlines()[-1:] or ["(nothing)"]
        raise NativeBenchmarkError(
            "expected one scene, one thread count, its runs and its body counts in Box2D's "
            f"benchmark output; it ended with: {last[0][:200]}"
        )
    (name, steps), (workers,) = scene[0], workers
    if int(steps) < 2:
        raise NativeBenchmarkError(f"Box2D ran {steps} step(s) of {name}: nothing was timed")
    bodies, shapes, contacts, joints = (int(n) for n in counts.groups())
    return {
        "scene": name,
        "steps": int(steps),
        "workers": int(workers),
        "runs_ms": [float(ms) for _, ms in runs],
        "bodies": bodies,
        "shapes": shapes,
        "contacts": contacts,
        "joints": joints,
    }


def to_row(parsed: dict) -> dict:
    """The suite's row of one parsed invocation: ms_per_step is the best run's total over
    its timed steps (steps - 1), in ms, as Box2D reports its own benchmarks."""
    ms = min(parsed["runs_ms"]) / (parsed["steps"] - 1)
    return {
        "engine": engine_name(parsed["workers"]),
        "backend": "cpu",
        "scene": parsed["scene"],
        "bodies": parsed["bodies"],
        "joints": parsed["joints"],
        "worlds": 1,
        "substeps": SUBSTEPS,
        "steps": parsed["steps"],
        "ms_per_step": round(ms, 3),
        "contact_points": "",  # Box2D counts contacts (pairs touching), not their points
        "stands": "",
    }


def run_scene(program: str | os.PathLike, scene: str, workers: int, repeats: int = REPEATS) -> dict:
    """Run Box2D's program on `scene` with `workers` workers, `repeats` runs, in a
    temporary folder (it writes <scene>.csv where it runs); its row (to_row).
    NativeBenchmarkError if it cannot run, fails, times out or prints something else."""
    command = [
        str(program),
        f"--threads={workers}",
        f"--workers={workers}",
        f"--benchmark={scene}",
        f"--repeats={repeats}",
    ]
    with tempfile.TemporaryDirectory(prefix="box2d_native_") as folder:
        try:
            done = subprocess.run(
                command, cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S
            )
        except OSError as error:
            raise NativeBenchmarkError(f"could not run {program}: {error}") from None
        except subprocess.TimeoutExpired:
            raise NativeBenchmarkError(
                f"{program} took over {TIMEOUT_S} s on {scene} ({workers} workers)"
            ) from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        last = output.strip().splitlines()[-1:] or ["no output"]
        raise NativeBenchmarkError(
            f"{program} exited with status {done.returncode} on {scene}: {last[0][:200]}"
        )
    parsed = parse_output(output)
    if parsed["scene"] != scene:
        raise NativeBenchmarkError(f"{program} ran {parsed['scene']}, not {scene}")
    if parsed["workers"] != workers:  # it clamps the count to the machine's cores
        raise NativeBenchmarkError(
            f"{program} ran {parsed['workers']} worker(s), not {workers} (too few cores?)"
        )
    return to_row(parsed)


def _log(line: str) -> None:
    print(line, flush=True)  # flushed: the runs take minutes, a pipe would hold it back


def scene_rows(
    program: str | os.PathLike, scene: str, workers=WORKERS, repeats: int = REPEATS, log=_log
) -> list[dict]:
    """A row per worker count that ran (run_scene); a failed one is left out, said in one
    line to `log`."""
    rows = []
    for count in workers:
        try:
            rows.append(run_scene(program, scene, count, repeats))
        except NativeBenchmarkError as error:
            log(f"  {engine_name(count)} left out of {scene}: {error}")
            continue
        log(f"  {engine_name(count)}: {scene} {rows[-1]['ms_per_step']} ms/step")
    return rows


def add_ratios(rows: list[dict], native: list[dict]) -> None:
    """Give fx2d_gpu's sleep-off rows in `rows` its time over each native row's
    (ratio_column), in place: Box2D's program runs its scenes with sleep off."""
    by_engine = {row["engine"]: row for row in native}
    for workers in WORKERS:
        theirs = by_engine.get(engine_name(workers))
        if theirs is None:
            continue
        for ours in rows:
            engine = ours.get("engine", "")
            if engine.startswith("fx2d_gpu") and engine.endswith("(no sleep)"):
                ours[ratio_column(workers)] = round(ours["ms_per_step"] / theirs["ms_per_step"], 3)
