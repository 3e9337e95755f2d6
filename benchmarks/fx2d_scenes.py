"""Fx2D's example scenes run in fx2d_gpu, with figures to set beside Fx2D's C++ engine.

    python -m benchmarks.fx2d_scenes [SCENE ...] [--arch auto|cpu|cuda|...]
        [--cpp-results FILE] [--substeps 14] [--results DIR] [--no-save]

Each scenario loads the example's scene file with fx2d_gpu.load_scene, does to it what the
example's main.cpp does (constraints, spawns, motor phases, the slingshot shot: the
package's example drivers, fx2d_gpu.examples.driver(name), with Fx2D's settings), steps it
with the dt the example uses and returns a few figures that show whether the physics agree:

    angry_boxes         pieces knocked over, tower displacement, target drop, ball's final x
    bucket_fill         balls spawned, balls in the bucket, mean ball height, ...
    truck               chassis final pose, chassis angle range, box's final pose, energy rise
    joint_control_demo  joint angle / slider position / rates at the end of each motor phase
    stacked_boxes       top box drop, boxes off the floor, ball's final x, energy rise

Scene files: the package's own, fx2d_gpu/examples/<scene>.yml (fx2d_gpu.examples.path),
which have the bodies, joints and numbers of Fx2D's examples/<scene>/Scene.yml. Nothing
outside the repository is read, except the file given to --cpp-results: the JSON lines
Fx2D's engine printed for the same scenarios (one object per scene: {"scene": ...,
"figures": {...}}), printed beside fx2d_gpu's figures. A CSV goes to
benchmarks/results/<device>/fx2d_scenes.csv.

Fx2D's FxScene runs 14 substeps per step by default (Scene.h), which none of the examples
change, so --substeps defaults to 14 here too (fx2d_gpu's own default is 11).
"""

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

import fx2d_gpu as fx
from fx2d_gpu import examples
from fx2d_gpu.device import runtime

from .common import device_name, print_table, save_csv

#: FxScene's default substeps (Fx2D include/Fx2D/Scene.h); the examples keep it.
SUBSTEPS = 14
#: FxRylbRenderer(scene, 60): fixed 1/60 s frames, after one first step of FxScene's minimum
#: dt (1e-3 s) that FxRylbRenderer::run() takes before its loop (the step callback sees it).
FRAME_DT = 1.0 / 60.0
FIRST_DT = 1e-3

SCENES = ("angry_boxes", "bucket_fill", "truck", "joint_control_demo", "stacked_boxes")


# ---------------------------------------------------------------------- helpers
def _wrap(angle):
    """Angles wrapped to [-pi, pi), as Fx2D keeps an entity's theta."""
    return (np.asarray(angle) + math.pi) % (2.0 * math.pi) - math.pi


def _energy(scene, state, bodies) -> float:
    """Kinetic + potential energy (J) of `bodies` in world 0 (all of gravity scale 1)."""
    g = np.array(scene.gravity)
    total = 0.0
    for b in bodies:
        m, inertia = scene.body_mass(b), scene.body_inertia(b)
        v, w = state.velocity[0, b], state.angular_velocity[0, b]
        total += 0.5 * m * float(v @ v) + 0.5 * inertia * float(w * w)
        total -= m * float(g @ state.position[0, b])
    return total


def _steps(n: int, scale: float) -> int:
    """A phase's step count, shortened by `scale` for smoke tests (at least one step)."""
    return max(1, round(n * scale))


def _result(name, dt, steps, sim_time, figures) -> dict:
    return {
        "scene": name,
        "engine": "fx2d_gpu",
        "dt": dt,
        "steps": steps,
        "sim_time": sim_time,
        "figures": {k: float(v) for k, v in figures.items()},
    }


# ---------------------------------------------------------------------- scenarios
def angry_boxes(path, arch="auto", substeps=SUBSTEPS, scale=1.0) -> dict:
    """Fx2D's examples/angry_boxes: a two-storey tower of crates and lintels with a ball
    (`target`) on top, on a platform; a ball fired from a slingshot at (3, 3).

    main.cpp: FxSlingshot (slingshot.h) parks the ball at the anchor (3, 3), gravity off,
    until the mouse drags it back and lets go; release fires it at (anchor - ball) * 9 m/s
    with gravity on. FxRylbRenderer(scene, 60) steps 1e-3 s once, then 1/60 s frames. A
    piece counts as knocked over once it fell > 0.35 m or tipped |theta| > 0.6 rad.

    Headless, the same for both engines: the first 1e-3 s step, 60 frames (1 s) with the ball
    parked (here: a force cancelling its weight), then the shot of Fx2D's test_slingshot.cpp
    (pulled straight back 2 m: from (1, 3) at 18 m/s, level) and 240 frames (4 s).
    Figures: knocked_over (of 7), tower_mean_displacement (m, the pieces' mean distance from
    where they started), target_drop (m), ball_x_end (m).
    """
    scene = fx.load_scene(path, arch=arch, substeps=substeps)
    names = ("box_l1", "box_r1", "lintel1", "box_l2", "box_r2", "lintel2", "target")
    tower = [scene.body_index(n) for n in names]
    hold_steps, flight_steps = _steps(60, scale), _steps(240, scale)
    # The package's driver: the ball held for the first step and hold_steps more, then shot.
    slingshot = examples.driver("angry_boxes", hold_steps=hold_steps)
    slingshot.setup(scene)
    ball = slingshot.ball
    start = scene.get_state()
    slingshot.step(scene, FIRST_DT)
    for _ in range(hold_steps + flight_steps):
        slingshot.step(scene, FRAME_DT)
    end = scene.get_state()
    fell = start.position[0, tower, 1] - end.position[0, tower, 1] > 0.35
    tipped = np.abs(_wrap(end.angle[0, tower])) > 0.6
    moved = np.linalg.norm(end.position[0, tower] - start.position[0, tower], axis=1)
    return _result(
        "angry_boxes",
        FRAME_DT,
        1 + hold_steps + flight_steps,
        FIRST_DT + (hold_steps + flight_steps) * FRAME_DT,
        {
            "knocked_over": int(np.count_nonzero(fell | tipped)),
            "tower_mean_displacement": moved.mean(),
            "target_drop": start.position[0, tower[-1], 1] - end.position[0, tower[-1], 1],
            "ball_x_end": end.position[0, ball, 0],
        },
    )


def bucket_fill(path, arch="auto", substeps=SUBSTEPS, scale=1.0) -> dict:
    """Fx2D's examples/bucket_fill: a static bucket (bottom and two walls) floating over a
    floor, and balls raining into it until it overflows.

    main.cpp, in the step callback (after every step, the renderer's first 1e-3 s step
    included): every 6th step spawns ball n (n < 300) at (8 + 1.7 sin(2.399 n), 11.4),
    radius 0.16 + 0.05 (n % 3), mass 0.6, elasticity 0.1, friction 0.4 / 0.3 (a
    self-colliding group), then counts the balls overlapping the box centred at (8, 6.6),
    2.4 x 2.8 m (the bucket interior). 1/60 s frames.

    Here the 1e-3 s step and 2,100 frames (35 s: the 300 spawns take 30 s), bodies added to
    the running scene the same way. Figures: spawned, in_bucket (balls overlapping the box),
    mean_ball_y (m), max_speed_end (m/s), outside_scene (ball centres outside the scene
    rectangle [0, 16] x [0, 12]).
    """
    scene = fx.load_scene(path, arch=arch, substeps=substeps)
    steps = _steps(2100, scale)
    # The package's driver spawns ball n before the step after step 6 (n + 1): what
    # main.cpp's callback does after that step.
    rain = examples.driver("bucket_fill")
    rain.setup(scene)
    rain.step(scene, FIRST_DT)
    for _ in range(steps):
        rain.step(scene, FRAME_DT)
    balls = rain.balls
    s = scene.get_state()
    centres = s.position[0, balls] if balls else np.zeros((0, 2))
    outside = (
        (centres[:, 0] < 0) | (centres[:, 0] > 16) | (centres[:, 1] < 0) | (centres[:, 1] > 12)
    )
    speed = np.linalg.norm(s.velocity[0, balls], axis=1) if balls else np.zeros(0)
    return _result(
        "bucket_fill",
        FRAME_DT,
        1 + steps,
        FIRST_DT + steps * FRAME_DT,
        {
            "spawned": len(balls),
            "in_bucket": rain.count_inside(scene),
            "mean_ball_y": centres[:, 1].mean() if balls else math.nan,
            "max_speed_end": speed.max() if balls else math.nan,
            "outside_scene": int(np.count_nonzero(outside)),
        },
    )


def truck(path, arch="auto", substeps=SUBSTEPS, scale=1.0, solver="xpbd") -> dict:
    """Fx2D's examples/truck: a two-part truck on two wheels dropped beside a ramp, which it
    rolls back down, and a heavy box on the ground to the left.

    main.cpp / main_headless.cpp build the rig in code: truck_head - truck_back held by
    FxMotionAlongAxisConstraint (x, head's frame), FxSeparationConstraint (x, limits 0, 0)
    and FxAngleLockConstraint, each of compliance 1e-5 (together a weld); wheel2 on
    FxAnchorConstraint to the head at (0.1, -0.65), wheel1 to the back at (0.48, -0.475)
    (head's / back's frame, free rotation); constrained pairs and wheel2 - truck_back do not
    collide. main_headless.cpp steps 600 x 5 ms (3 s); no motor, no forces.

    Here: the weld is a prismatic joint along the head's x with travel [0, 0] (the same three
    constraints, but rigid: fx2d_gpu joints have no compliance), the wheels revolute joints
    with the default free +-pi limits, and scene.disable_collision(wheel2, truck_back).
    Figures: head_x_end, head_y_end (m), head_theta_min / _max (rad, over the run: did it
    flip?), box_y_end (m), box_dx (m), energy_rise_max (J, the most the five bodies' kinetic
    + potential energy rose above its start).
    """
    scene = fx.load_scene(path, arch=arch, substeps=substeps, solver=solver)
    # The package's driver builds the rig; free wheels (no motor), as main_headless.cpp.
    rig = examples.driver("truck", wheel_speed=None)
    rig.setup(scene)
    head, back, wheel1, wheel2 = rig.head, rig.back, rig.rear_wheel, rig.front_wheel
    box = scene.body_index("box")
    dynamic = [head, back, wheel1, wheel2, box]
    start = scene.get_state()
    e0 = _energy(scene, start, dynamic)
    dt, steps = 0.005, _steps(600, scale)
    theta = [float(_wrap(start.angle[0, head]))]
    rise = 0.0
    for _ in range(steps):
        scene.step(dt)
        s = scene.get_state()
        theta.append(float(_wrap(s.angle[0, head])))
        rise = max(rise, _energy(scene, s, dynamic) - e0)
    return _result(
        "truck",
        dt,
        steps,
        steps * dt,
        {
            "head_x_end": s.position[0, head, 0],
            "head_y_end": s.position[0, head, 1],
            "head_theta_min": min(theta),
            "head_theta_max": max(theta),
            "box_y_end": s.position[0, box, 1],
            "box_dx": s.position[0, box, 0] - start.position[0, box, 0],
            "energy_rise_max": rise,
        },
    )


def joint_control_demo(path, arch="auto", substeps=SUBSTEPS, scale=1.0) -> dict:
    """Fx2D's examples/joint_control_demo: an arm on a revolute motor (`arm_motor`, about a
    static base) and a block on a prismatic motor (`slider_motor`, along a static rail), no
    gravity on either.

    main.cpp (headless): dt 0.01 s, three phases of 200 steps. POSITION: arm pid
    (6, 0.05, 3) to 1 rad, slider pid (8, 0.2, 5) to 1 m. VELOCITY: pids (6, 0.2, 0) and
    (8, 0.2, 0), targets 3.14 rad/s and 0.5 m/s. EFFORT: 15 N m on the arm, -2 N on the
    slider. Every set_pid / set_theta / mode change restarts the PID state, as
    set_joint_mode does here.

    Figures at each phase's end (t = 2, 4, 6 s): theta_2s (rad, wrapped as Fx2D's
    get_theta), pos_2s (m); omega_4s (rad/s), vel_4s (m/s), pos_4s; omega_6s, pos_6s, vel_6s.
    """
    scene = fx.load_scene(path, arch=arch, substeps=substeps)
    motors = examples.driver("joint_control_demo")  # the package's driver: its PHASES
    motors.setup(scene)
    arm, slider = motors.arm, motors.slider
    dt, steps = 0.01, _steps(200, scale)
    figures = {}

    def phase(index):
        motors.set_phase(scene, index)
        for _ in range(steps):
            scene.step(dt)
        js = scene.joint_state()
        return (
            float(_wrap(js.position[0, arm])),
            float(js.rate[0, arm]),
            float(js.position[0, slider]),
            float(js.rate[0, slider]),
        )

    theta, _, pos, _ = phase(0)
    figures.update(theta_2s=theta, pos_2s=pos)
    _, omega, pos, vel = phase(1)
    figures.update(omega_4s=omega, vel_4s=vel, pos_4s=pos)
    _, omega, pos, vel = phase(2)
    figures.update(omega_6s=omega, pos_6s=pos, vel_6s=vel)
    return _result("joint_control_demo", dt, 3 * steps, 3 * steps * dt, figures)


def stacked_boxes(path, arch="auto", substeps=SUBSTEPS, scale=1.0) -> dict:
    """Fx2D's examples/stacked_boxes: a 3-2-1 pyramid of boxes (elasticity 1) on a floor
    block, and a heavy ball (5 kg, elasticity 0.8) thrown at it with init_velocity (-5, 0).

    main.cpp: only loads the scene and runs FxRylbRenderer(scene, 60).run(false): the first
    1e-3 s step, then 1/60 s frames once play is pressed. Here the 1e-3 s step and 300
    frames (5 s). Figures: top_box_drop (m, box6), boxes_off_floor (box centres below the
    floor block's top, y = 3.375), ball_x_end (m), max_speed_end (m/s, of the seven dynamic
    bodies), energy_rise_max (J, the most their kinetic + potential energy rose above its
    start).
    """
    scene = fx.load_scene(path, arch=arch, substeps=substeps)
    boxes = [scene.body_index(f"box{i}") for i in range(1, 7)]
    ball = scene.body_index("ball")
    dynamic = boxes + [ball]
    start = scene.get_state()
    e0 = _energy(scene, start, dynamic)
    steps = _steps(300, scale)
    rise = 0.0
    for i in range(steps + 1):
        scene.step(FIRST_DT if i == 0 else FRAME_DT)
        s = scene.get_state()
        rise = max(rise, _energy(scene, s, dynamic) - e0)
    speeds = np.linalg.norm(s.velocity[0, dynamic], axis=1)
    return _result(
        "stacked_boxes",
        FRAME_DT,
        1 + steps,
        FIRST_DT + steps * FRAME_DT,
        {
            "top_box_drop": start.position[0, boxes[-1], 1] - s.position[0, boxes[-1], 1],
            "boxes_off_floor": int(np.count_nonzero(s.position[0, boxes, 1] < 3.375)),
            "ball_x_end": s.position[0, ball, 0],
            "max_speed_end": speeds.max(),
            "energy_rise_max": rise,
        },
    )


SCENARIOS = {
    "angry_boxes": angry_boxes,
    "bucket_fill": bucket_fill,
    "truck": truck,
    "joint_control_demo": joint_control_demo,
    "stacked_boxes": stacked_boxes,
}


# ---------------------------------------------------------------------- files
def scene_path(name: str) -> Path:
    """The scene file of the scenario `name`: fx2d_gpu/examples/<name>.yml."""
    if name not in SCENARIOS:
        raise ValueError(f"name: no scenario {name!r}; choose from {', '.join(SCENES)}")
    return examples.path(name)


def read_cpp_results(path) -> dict[str, dict]:
    """{scene: result} from JSON lines ({"scene": ..., "figures": {...}, ...} each)."""
    results = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            record = json.loads(line)
            results[record["scene"]] = record
    return results


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 1e-3 else f"{value:.4f}"


# ---------------------------------------------------------------------- main
def run(
    names, arch="auto", cpp_results=None, substeps=SUBSTEPS, results_dir=None, save=True, scale=1.0
) -> list[dict]:
    """Run the scenarios `names`, print their figures (beside Fx2D's, read from the JSON
    lines file `cpp_results`, where given), save a CSV unless `save` is False; the rows.
    `scale` shortens each scenario's phases (their step counts times it, at least one
    step: smoke tests); 1 runs them as Fx2D does."""
    backend = runtime.ensure_initialized(arch)
    cpp = read_cpp_results(cpp_results) if cpp_results else {}
    date = datetime.date.today().isoformat()
    device = device_name(backend)
    rows = []
    for name in names:
        path = scene_path(name)
        start = time.perf_counter()
        result = SCENARIOS[name](path, arch=arch, substeps=substeps, scale=scale)
        wall = time.perf_counter() - start
        theirs = cpp.get(name)
        if cpp and theirs is None:
            print(f"{name}: no line for it in {cpp_results}", file=sys.stderr)
        for key, ours in (("dt", result["dt"]), ("steps", result["steps"]), ("substeps", substeps)):
            if (
                theirs is not None
                and key in theirs
                and not math.isclose(theirs[key], ours, rel_tol=1e-6)
            ):
                print(
                    f"{name}: Fx2D's run has {key} {theirs[key]}, this one {ours}: the "
                    "figures are not of the same run",
                    file=sys.stderr,
                )
        print(
            f"\n{name}  ({path}; dt {result['dt']:.4g} s, {substeps} substeps, "
            f"{result['steps']} steps = {result['sim_time']:.3f} s; {wall:.1f} s wall)"
        )
        table = []
        for key, ours in result["figures"].items():
            other = (theirs or {}).get("figures", {}).get(key)
            row = {
                "date": date,
                "device": device,
                "backend": backend,
                "scene": name,
                "figure": key,
                "fx2d_gpu": ours,
                "fx2d_cpp": other,
                "diff": None if other is None else ours - other,
                "dt": result["dt"],
                "substeps": substeps,
                "steps": result["steps"],
                "sim_time": result["sim_time"],
                "wall_s": round(wall, 2),
            }
            rows.append(row)
            shown = {"figure": key, "fx2d_gpu": _fmt(ours)}
            if cpp:
                shown.update(fx2d_cpp=_fmt(other), diff=_fmt(row["diff"]))
            table.append(shown)
        print_table(table)
    if rows and save:
        print(f"\nsaved {save_csv(backend, 'fx2d_scenes', rows, results_dir)}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fx2d_scenes", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "scenes",
        nargs="*",
        default=[],
        metavar="SCENE",
        help=f"any of {', '.join(SCENES)} (default: all)",
    )
    parser.add_argument("--arch", default="auto", help="auto | cpu | gpu | cuda | vulkan | ...")
    parser.add_argument(
        "--cpp-results",
        default=None,
        type=Path,
        help="JSON lines of Fx2D's figures for the same scenarios",
    )
    parser.add_argument(
        "--substeps",
        default=SUBSTEPS,
        type=int,
        help=f"substeps per step (default {SUBSTEPS}, FxScene's default)",
    )
    parser.add_argument("--results", default=None, help="folder for <device>/fx2d_scenes.csv")
    parser.add_argument("--no-save", action="store_true", help="print only, write no CSV")
    args = parser.parse_args(argv)
    bad = [s for s in args.scenes if s not in SCENES]
    if bad:
        parser.error(f"unknown scene(s) {bad}; choose from {SCENES}")
    if args.cpp_results and not args.cpp_results.is_file():
        parser.error(f"--cpp-results {args.cpp_results} does not exist")
    run(
        args.scenes or list(SCENES),
        args.arch,
        args.cpp_results,
        args.substeps,
        args.results,
        not args.no_save,
    )


if __name__ == "__main__":
    main()
