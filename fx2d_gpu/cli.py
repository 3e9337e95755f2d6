"""`fx2d` command line: run | view | demo | bench.

fx2d run SCENE.yml [options]          simulate a scene file
fx2d run --example NAME [options]     ... or one of the package's example scenes
fx2d view SCENE.yml | --example NAME | --demo NAME    watch it in a window (GGUI)
fx2d view ... --offscreen --frames N --gif OUT.gif     ... or record it without one
fx2d demo NAME [options]              a built-in demo
fx2d demo --list                      the demos and the example scenes
fx2d bench [options]                  the benchmarks (from a source checkout)
fx2d --version                        the fx2d_gpu version
"""

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np


def _size(text):
    """--size's argument: WxH pixels, each 16 to render.MAX_IMAGE_SIDE."""
    from .draw.render import MAX_IMAGE_SIDE

    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 640x480, got {text!r}") from None
    if not (16 <= w <= MAX_IMAGE_SIDE and 16 <= h <= MAX_IMAGE_SIDE):
        raise argparse.ArgumentTypeError(
            f"size must be 16x16 to {MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE} pixels, got {text!r}"
        )
    return (w, h)


def _step_length(text):
    """--dt's argument, s: a finite number from checks.MIN_DT; above MAX_DT it is clamped,
    as Scene.step clamps it (so a GIF's frame rate is the simulated one)."""
    from .checks import MAX_DT, MIN_DT

    try:
        dt = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a step length in seconds, got {text!r}"
        ) from None
    if not math.isfinite(dt) or dt < MIN_DT:
        raise argparse.ArgumentTypeError(
            f"must be a finite step length >= {MIN_DT} s, got {text!r}"
        )
    return min(dt, MAX_DT)


def _world_count(text):
    """--worlds' argument: an int >= 1."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of worlds, got {text!r}"
        ) from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return count


#: The options that name a file to write, and the suffix the file must have (None: any).
_OUTPUT_FILES = {"gif": ".gif", "png": None, "screenshot": None, "save": None}


def _check_outputs(parser, args):
    """Refuse, before anything is simulated, an output the run could not write at its end:
    a file option naming a folder, a file in a folder that does not exist, a GIF without
    .gif, or --png-dir naming a file."""
    for option, suffix in _OUTPUT_FILES.items():
        value = getattr(args, option, None)
        if not value:
            continue
        path = Path(value)
        flag = f"--{option}"
        if path.is_dir():
            parser.error(f"{flag} {value}: is a folder, give a file name")
        if not path.absolute().parent.is_dir():
            parser.error(f"{flag} {value}: the folder {str(path.parent)!r} does not exist")
        if suffix is not None and path.suffix.lower() != suffix:
            parser.error(f"{flag} {value}: the file name must end in {suffix}")
    folder = getattr(args, "png_dir", None)
    if folder and Path(folder).exists() and not Path(folder).is_dir():
        parser.error(f"--png-dir {folder}: is a file, not a folder")


def _example_name(text):
    """--example's argument: the name of one of the package's example scenes."""
    from . import examples

    if text not in examples.names():
        raise argparse.ArgumentTypeError(
            f"no example scene named {text!r}; the examples are {', '.join(examples.names())} "
            "(fx2d demo --list)"
        )
    return text


def _add_scene_source(parser, what):
    """A scene file (positional, optional) or --example NAME: exactly one, checked by
    _scene_source once parsed."""
    parser.add_argument("scene", nargs="?", default=None, help=what)
    parser.add_argument(
        "--example",
        type=_example_name,
        default=None,
        metavar="NAME",
        help="one of the example scene files shipped with fx2d_gpu, instead "
        "of a file (fx2d demo --list names them)",
    )


def _scene_source(parser, args, others=()):
    """(path, label) of the scene file to load: args.scene or the example args.example.
    Exactly one of them (and of `others`, the names of further sources given) must be set;
    otherwise a usage error that says so."""
    given = [
        name
        for name, value in (("a scene file", args.scene), ("--example", args.example), *others)
        if value
    ]
    if len(given) != 1:
        choices = " or ".join(["a scene file", "--example NAME", *(name for name, _ in others)])
        parser.error(
            f"give {choices}"
            if not given
            else f"give one of {choices}, not {' and '.join(given)} together"
        )
    if args.example:
        from . import examples

        return examples.path(args.example), f"example {args.example}"
    # A Path, never the string: load_scene reads a string not ending in .yml/.yaml as YAML
    # text, and a scene file may have any name.
    path = Path(args.scene)
    if path.exists() and not path.is_file():  # a folder, a device, a FIFO (would block)
        parser.error(
            f"scene file {args.scene!r} is not a regular file"
            f"{' (a folder)' if path.is_dir() else ''}"
        )
    return path, path.name


def _add_run_options(parser, steps_default):
    parser.add_argument("--steps", type=int, default=steps_default, help="steps to simulate")
    parser.add_argument(
        "--dt",
        type=_step_length,
        default=1 / 60,
        help="step length, s (>= 1e-3; above 0.06 clamped)",
    )
    parser.add_argument(
        "--substeps",
        type=int,
        default=None,
        help="substeps per step (default: the solver's, 11 or 4)",
    )
    parser.add_argument(
        "--solver",
        default="xpbd",
        choices=("xpbd", "soft_step"),
        help="xpbd (Fx2D's, the default) or soft_step (Box2D v3's)",
    )
    parser.add_argument("--worlds", type=_world_count, default=None, help="copies stepped together")
    parser.add_argument("--arch", default="auto", help="auto | cpu | gpu | cuda | vulkan | metal")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--gif", help="write an animated GIF of the run")
    out.add_argument("--png-dir", help="write one PNG per frame into this folder")
    out.add_argument("--png", help="write the last frame as a PNG")
    parser.add_argument("--every", type=int, default=2, help="steps between frames")
    parser.add_argument("--size", type=_size, default=(640, 480), help="frame size, WxH")
    parser.add_argument("--contacts", action="store_true", help="draw contact points")
    parser.add_argument("--save", help="save the final state to a .npz file")


class Progress:
    """A one-line progress bar on stderr, shown once a run has lasted a second.

    Its rate counts from `restart` on: the steps after the first, whose compile would
    otherwise count as stepping time.

    Args:
        total: the run's steps.
        clock: the time in seconds it reads (default time.perf_counter).
    """

    def __init__(self, total, clock=time.perf_counter):
        self.clock = clock
        self.total, self.start, self.shown = total, clock(), False
        self.counted_from = 0  # steps done when the rate's clock started

    def restart(self, done):
        """Count the rate from now, `done` steps done."""
        self.start, self.counted_from = self.clock(), done

    def update(self, done):
        elapsed = self.clock() - self.start
        if elapsed < 1.0 and not self.shown:
            return
        self.shown = True
        width = 30
        filled = int(width * done / max(self.total, 1))
        rate = (done - self.counted_from) / elapsed if elapsed > 0 else 0.0
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
            f"steps, {rate:.1f} steps/s"
        )
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")


def simulate(scene, args, label):
    """Step `scene` as the options say, write frames/state, print a summary."""
    from .draw.render import render_worlds

    if args.steps < 0 or args.every < 1:
        raise SystemExit("--steps must be >= 0 and --every >= 1")
    from .draw.viewer import controller_of

    # A demo may drive its scene every frame (the lidar demo's agents and their rays).
    controller = controller_of(scene)

    def frame():
        rays = None if controller is None else controller.rays
        return render_worlds(scene, args.size, contacts=args.contacts, rays=rays, joints=True)

    frames = [frame()] if args.gif or args.png_dir else None
    step_times = _step_scene(scene, args, controller, frames, frame)
    written = _write_outputs(scene, args, frames, frame)
    _print_summary(scene, args, label, step_times)
    for item in written:
        print(f"wrote {item}")


def _step_scene(scene, args, controller, frames, frame) -> list[float]:
    """args.steps steps of args.dt s (the demo's `controller`, if any, driving each), a
    frame() appended to `frames` every args.every steps (None: no frames), a progress bar
    on stderr; returns each step's wall time, s."""
    progress = Progress(args.steps)
    step_times = []
    for i in range(args.steps):
        if controller is not None:
            controller.before_step(scene)
        if i == 0:
            # The first step compiles the kernels (or loads them from Taichi's offline
            # cache): seconds to minutes of silence otherwise.
            sys.stderr.write(
                "fx2d: first step: compiling the kernels (kept in Taichi's cache "
                "for the next run) ..."
            )
            sys.stderr.flush()
        start = time.perf_counter()
        scene.step(args.dt)
        step_times.append(time.perf_counter() - start)
        if i == 0:
            sys.stderr.write(f" done in {step_times[0]:.1f} s\n")
            sys.stderr.flush()
            progress.restart(1)
        if frames is not None and (i + 1) % args.every == 0:
            frames.append(frame())
        if i % 10 == 0 or i == args.steps - 1:
            progress.update(i + 1)
    progress.close()
    return step_times


def _write_outputs(scene, args, frames, frame) -> list[str]:
    """The files the options ask for: `frames` (images) as --gif or --png-dir, frame() as
    --png, the state as --save; returns a line naming each one written."""
    from .draw.render import write_gif, write_png

    written = []
    if args.gif:
        write_gif(args.gif, frames, fps=1.0 / (args.dt * args.every))
        written.append(f"{args.gif} ({len(frames)} frames)")
    elif args.png_dir:
        folder = Path(args.png_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for k, image in enumerate(frames):
            write_png(folder / f"frame_{k:05d}.png", image)
        written.append(f"{folder}/ ({len(frames)} frames)")
    elif args.png:
        write_png(args.png, frame())
        written.append(args.png)
    if args.save:
        s = scene.get_state()
        np.savez(
            args.save,
            position=s.position,
            angle=s.angle,
            velocity=s.velocity,
            angular_velocity=s.angular_velocity,
            sleeping=s.sleeping,
            time=scene.time,
        )
        written.append(args.save)
    return written


def _print_summary(scene, args, label, step_times):
    """The run's one-line summary on stdout: steps, bodies, contacts, ms a step."""
    contacts = len(scene.contacts(world=None)) if scene.n_bodies else 0
    # The first step includes compiling (or loading) the kernels: report it apart.
    steady = step_times[1:] or step_times
    ms = 1000.0 * float(np.median(steady)) if steady else 0.0
    first = f", first step {step_times[0]:.2f} s" if step_times else ""
    print(
        f"{label}: {args.steps} steps, {scene.n_bodies} bodies x {scene.n_worlds} worlds, "
        f"{contacts} contact manifolds, {ms:.2f} ms/step (median{first}), "
        f"substeps {scene.substeps}, solver {scene.solver}, backend {scene.backend}"
    )


def cmd_run(args, parser):
    from .io.scene_loader import load_scene

    path, label = _scene_source(parser, args)
    _check_outputs(parser, args)
    options = {
        "n_worlds": args.worlds or 1,
        "arch": args.arch,
        "substeps": args.substeps,
        "solver": args.solver,
    }
    try:
        if args.example:  # the scene with its driver (joints, spawns...): simulate steps it
            from . import examples

            scene = examples.load(args.example, **options).scene
        else:
            scene = load_scene(path, **options)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"fx2d: {exc}") from None
    simulate(scene, args, label)


def _list_demos_and_examples():
    """`fx2d demo --list`: each demo and each example scene, a line each, under a heading
    that says how to run them."""
    from . import examples
    from .demos import DEMOS

    def first_sentence(text):
        paragraph = " ".join(text.strip().split("\n\n")[0].split())
        end = paragraph.find(". ")
        sentence = paragraph if end < 0 else paragraph[: end + 1]
        return sentence[:1].upper() + sentence[1:]

    print("Demos (fx2d demo NAME [--gif OUT.gif ...], or fx2d view --demo NAME):")
    for name, builder in DEMOS.items():
        print(f"  {name:20s} {first_sentence(builder.__doc__)}")
    print(
        "\nExample scenes (fx2d run --example NAME [--gif OUT.gif ...], or "
        "fx2d view --example NAME):"
    )
    for name in examples.names():
        print(f"  {name:20s} {first_sentence(examples.description(name))}")


def cmd_demo(args, parser):
    from .demos import DEMOS

    if args.list or args.name is None:
        _list_demos_and_examples()
        return
    if args.name not in DEMOS:
        raise SystemExit(f"fx2d: no demo named {args.name!r} (fx2d demo --list)")
    _check_outputs(parser, args)
    kwargs = {"arch": args.arch}
    if args.worlds:
        kwargs["n_worlds"] = args.worlds
    if args.bodies:
        kwargs["bodies"] = args.bodies
    if args.base:
        kwargs["base"] = args.base
    scene = DEMOS[args.name](**kwargs)
    from .physics.solver.stages import DEFAULT_SUBSTEPS

    if args.solver != scene.solver:  # before its first step: nothing solved yet
        scene.solver = args.solver
        scene.substeps = DEFAULT_SUBSTEPS[args.solver]
    if args.substeps:
        scene.substeps = args.substeps
    simulate(scene, args, f"demo {args.name}")


def _compiled(scene_factory, dt):
    """scene_factory, its scenes' kernels compiled before the viewer opens, saying so on
    stderr: one step of `dt` s, taken and undone (snapshot and restore), so the window
    does not sit blank through the compile and the scene starts where it was built."""

    def factory():
        scene = scene_factory()
        sys.stderr.write(
            "fx2d: compiling the kernels (kept in Taichi's cache for the next run) ..."
        )
        sys.stderr.flush()
        start = time.perf_counter()
        before = scene.snapshot()
        scene.step(dt)
        scene.restore(before)
        sys.stderr.write(f" done in {time.perf_counter() - start:.1f} s\n")
        return scene

    return factory


def cmd_view(args, parser, windows=None):
    """fx2d view; `windows`: what opens the window (run_viewer's; None: GGUI's)."""
    from .draw.viewer import ViewerUnavailable, run_viewer

    if args.demo:
        scene_factory, instead, source = _demo_to_view(args, parser)
    else:
        scene_factory, instead, source = _file_to_view(args, parser)
    if args.frames is not None and args.frames < 1:
        parser.error("--frames must be >= 1")
    scene_factory = _compiled(scene_factory, args.dt)
    _check_outputs(parser, args)
    if args.offscreen:
        if args.frames is None:
            parser.error("--offscreen needs --frames N (how many frames to record)")
        if not (args.png_dir or args.gif or args.screenshot):
            parser.error(
                "--offscreen needs somewhere to write: --png-dir DIR, --gif PATH or "
                "--screenshot PATH"
            )
    options = _viewer_options(args)
    try:
        written = run_viewer(scene_factory, **options, windows=windows)
    except ViewerUnavailable as exc:
        raise SystemExit(
            f"fx2d view: cannot open a window: {exc}\n"
            f"Render to a file instead: {instead}\n"
            f"or record through GGUI without a display (needs Vulkan): "
            f"fx2d view {source} --offscreen --frames 300 --gif out.gif"
        ) from None
    except ValueError as exc:  # e.g. --world out of range
        raise SystemExit(f"fx2d view: {exc}") from None
    for item in written:
        print(f"wrote {item}")


def _demo_to_view(args, parser):
    """fx2d view --demo NAME: (scene factory, the command that renders it to a file
    instead, the source as the command line names it)."""
    from .demos import DEMOS

    if args.scene or args.example:
        parser.error(
            "give one of a scene file or --example NAME or --demo NAME, not "
            f"{'--example' if args.example else 'a scene file'} and --demo "
            "together"
        )
    if args.demo not in DEMOS:
        parser.error(f"no demo named {args.demo!r} (fx2d demo --list)")
    kwargs = {"arch": args.arch}
    if args.worlds:
        kwargs["n_worlds"] = args.worlds

    def scene_factory():
        return DEMOS[args.demo](**kwargs)

    return scene_factory, f"fx2d demo {args.demo} --gif out.gif", f"--demo {args.demo}"


def _file_to_view(args, parser):
    """fx2d view SCENE.yml or --example NAME: as _demo_to_view."""
    from .io.scene_loader import load_scene

    path, _ = _scene_source(parser, args, others=(("--demo NAME", args.demo),))

    def scene_factory():
        if args.example:  # the scene with its driver, which the viewer steps
            from . import examples

            return examples.load(args.example, n_worlds=args.worlds or 1, arch=args.arch).scene
        return load_scene(path, n_worlds=args.worlds or 1, arch=args.arch)

    if args.example:
        return (
            scene_factory,
            f"fx2d run --example {args.example} --gif out.gif",
            f"--example {args.example}",
        )
    return scene_factory, f"fx2d run {args.scene} --gif out.gif", str(args.scene)


def _viewer_options(args) -> dict:
    """run_viewer's keywords from fx2d view's options."""
    from .draw.viewer import Overlays

    overlays = Overlays(
        contacts=args.contacts,
        aabbs=args.aabbs,
        joints=args.joints,
        sleeping=args.sleeping,
        hud=not args.no_hud,
    )
    return dict(
        dt=args.dt,
        size=args.size,
        offscreen=args.offscreen,
        frames=args.frames,
        png_dir=args.png_dir,
        gif=args.gif,
        screenshot=args.screenshot,
        world=args.world or 0,
        tiled=(False if args.world is not None else None),
        overlays=overlays,
        paused=args.paused,
    )


#: What fx2d bench needs in the current folder: a source checkout's benchmark suite.
BENCH_SUITE = Path("benchmarks") / "suite.py"


def cmd_bench(bench_args):
    """fx2d bench ARGS: `python -m benchmarks ARGS`, from the current folder's checkout.

    The benchmarks are not part of the installed package; the installed `fx2d` command
    does not have the current folder on sys.path (python -m does), so a checkout's folder
    is put there when it holds benchmarks/suite.py."""
    here = Path.cwd()
    in_checkout = (here / BENCH_SUITE).is_file()
    if in_checkout and str(here) not in sys.path:
        sys.path.insert(0, str(here))
    try:
        from benchmarks import suite
    except ModuleNotFoundError as exc:
        if not in_checkout or exc.name in ("benchmarks", "benchmarks.suite"):
            raise SystemExit(
                f"fx2d bench: no benchmarks here ({here / BENCH_SUITE} does not exist). The "
                "benchmarks come with a source checkout of fx2d_gpu, not with the installed "
                'package: clone the repository, install it with pip install -e ".[bench]" '
                "and run fx2d bench from its root folder."
            ) from None
        raise SystemExit(
            f"fx2d bench: the benchmarks need {exc.name!r}, which is not "
            'installed: pip install -e ".[bench]" (in the checkout)'
        ) from None
    suite.main(bench_args)


def main(argv=None, *, windows=None):
    """fx2d's command line on `argv` (None: sys.argv[1:]); returns the exit status.
    `windows`: what opens fx2d view's window (draw.viewer.WindowFactory; None: GGUI's, on
    this process's display)."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="fx2d", description="fx2d_gpu command line")
    parser.add_argument("--version", action="version", version=f"fx2d_gpu {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a scene file (or --example NAME)")
    _add_scene_source(run, "Fx2D YAML scene file (or --example NAME)")
    _add_run_options(run, 600)
    view = _add_view_parser(sub)
    demo = _add_demo_parser(sub)
    sub.add_parser(
        "bench",
        add_help=False,
        help="run the benchmarks (from a source checkout): fx2d bench --help",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # everything after "bench" is the benchmark runner's
        cmd_bench(argv[1:])
        return 0
    args = parser.parse_args(argv)
    command = {"run": (cmd_run, run), "demo": (cmd_demo, demo), "view": (cmd_view, view)}
    handler, subparser = command[args.command]
    if handler is cmd_view:
        cmd_view(args, subparser, windows)
    else:
        handler(args, subparser)
    return 0


def _add_view_parser(sub):
    """fx2d view's parser and options, added to the subcommands `sub`."""
    view = sub.add_parser("view", help="watch a scene file in a window (GGUI)")
    _add_scene_source(view, "Fx2D YAML scene file (or --example NAME, or --demo NAME)")
    view.add_argument(
        "--demo",
        default=None,
        metavar="NAME",
        help="a built-in demo instead of a file (fx2d demo --list)",
    )
    view.add_argument("--worlds", type=_world_count, default=None, help="copies stepped together")
    view.add_argument("--arch", default="auto", help="auto | cpu | gpu | cuda | vulkan | metal")
    view.add_argument(
        "--dt",
        type=_step_length,
        default=1 / 60,
        help="step length, s (a step a frame; >= 1e-3, above 0.06 clamped)",
    )
    view.add_argument("--size", type=_size, default=(1024, 768), help="window size, WxH")
    view.add_argument(
        "--world",
        type=int,
        default=None,
        help="show this world alone (default: tiles of the first 64 worlds of a batched scene)",
    )
    view.add_argument(
        "--frames", type=int, default=None, help="stop after N frames (the window closes)"
    )
    view.add_argument(
        "--offscreen",
        action="store_true",
        help="no window: draw through GGUI offscreen (Vulkan, no display; the "
        "image renderer where GGUI cannot start) into --png-dir, --gif or "
        "--screenshot; needs --frames",
    )
    recording = view.add_mutually_exclusive_group()
    recording.add_argument("--gif", help="write every frame into an animated GIF")
    recording.add_argument("--png-dir", help="write every frame as a PNG into this folder")
    view.add_argument("--screenshot", help="write the last frame as a PNG")
    for flag, what in (
        ("contacts", "contact points and normals"),
        ("aabbs", "AABBs"),
        ("joints", "joints"),
        ("sleeping", "sleeping bodies"),
    ):
        view.add_argument(f"--{flag}", action="store_true", help=f"start showing {what}")
    view.add_argument("--no-hud", action="store_true", help="no heads-up text")
    view.add_argument(
        "--paused", action="store_true", help="start paused (space runs, n steps once)"
    )
    return view


def _add_demo_parser(sub):
    """fx2d demo's parser and options, added to the subcommands `sub`."""
    demo = sub.add_parser(
        "demo", help="run a built-in demo (--list: the demos and the example scenes)"
    )
    demo.add_argument("name", nargs="?")
    demo.add_argument(
        "--list",
        action="store_true",
        help="list the demos and the example scenes, and how to run each",
    )
    demo.add_argument("--bodies", type=int, default=None, help="bodies, where the demo has some")
    demo.add_argument("--base", type=int, default=None, help="pyramid base (boxes)")
    _add_run_options(demo, 180)
    return demo


if __name__ == "__main__":
    sys.exit(main())
