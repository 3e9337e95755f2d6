"""The `fx2d` command line (one run in a subprocess, through `python -m fx2d_gpu.cli`; the
others in this process, through cli.main, as the subprocess would run them: a fresh process
loads every kernel again, ~10-20 s each on the 2-core CI machine), GIF output, and the
viewer's mesh (headless)."""

import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from PIL import Image

import fx2d_gpu as fx
from fx2d_gpu import examples
from fx2d_gpu.draw.frame_geometry import FrameGeometry


def fx2d(*args):
    """`python -m fx2d_gpu.cli ARGS` in a subprocess (the entry point itself)."""
    return subprocess.run(
        [sys.executable, "-m", "fx2d_gpu.cli", *args], capture_output=True, text=True, timeout=600
    )


@dataclass
class Ran:
    """What a command line run left: its exit status and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def in_process(capsys):
    """fx2d's command line run by cli.main in this process, its exit status as the process
    would have it: main's return value, SystemExit's code (argparse's usage errors: 2), or
    for a SystemExit with a message, the message on stderr and status 1 (as Python does)."""
    from fx2d_gpu.cli import main

    def run(*args, windows=None) -> Ran:
        capsys.readouterr()
        try:
            code = main(list(args), windows=windows)
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        if isinstance(code, str):
            code, err = 1, err + code + "\n"
        return Ran(0 if code is None else code, out, err)

    return run


def test_run_writes_a_gif_that_shows_the_bodies(tmp_path, arch):
    gif, npz = tmp_path / "demo.gif", tmp_path / "state.npz"
    result = fx2d(
        "run",
        "--example",
        "joint_control_demo",
        "--steps",
        "20",
        "--every",
        "2",
        "--gif",
        str(gif),
        "--size",
        "240x160",
        "--arch",
        arch,
        "--save",
        str(npz),
    )
    assert result.returncode == 0, result.stderr
    assert "example joint_control_demo: 20 steps" in result.stdout
    assert "ms/step" in result.stdout
    image = Image.open(gif)
    assert image.n_frames == 11  # the first frame, then one every 2 steps
    image.seek(10)
    frame = np.asarray(image.convert("RGB")).astype(int)
    assert frame.std() > 10  # not blank
    # The arm (texture [200, 80, 40]) is drawn where the saved state puts its centre:
    # the scene's frame is 12 x 8 m in 240 x 160 px, 20 px per metre, y up.
    arm = np.load(npz)["position"][0, 1]
    px, py = int(arm[0] * 20), int(160 - arm[1] * 20)
    patch = frame[py - 1 : py + 2, px - 1 : px + 2].reshape(-1, 3)
    assert np.any(np.abs(patch - [200, 80, 40]).sum(axis=1) < 40), patch
    # The slider (texture [40, 160, 120]) too.
    slider = np.load(npz)["position"][0, 3]
    px, py = int(slider[0] * 20), int(160 - slider[1] * 20)
    assert np.abs(frame[py, px] - [40, 160, 120]).sum() < 40


def test_run_png_dir_and_bad_file(tmp_path, arch, in_process):
    result = in_process(
        "run",
        str(examples.path("truck")),
        "--steps",
        "4",
        "--every",
        "2",
        "--png-dir",
        str(tmp_path / "frames"),
        "--size",
        "64x48",
        "--arch",
        arch,
    )
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "frames").glob("*.png"))) == 3
    bad = tmp_path / "bad.yml"
    bad.write_text("scene: {size: [1, 1]}\nentities:\n  a: {collision: {geometry: {blob: 1}}}\n")
    result = in_process("run", str(bad), "--arch", arch)
    assert result.returncode != 0 and "'a'" in result.stderr and "blob" in result.stderr


def test_run_takes_a_file_or_an_example_exactly_one(tmp_path, arch, in_process):
    """`fx2d run --example NAME` runs the package's scene file of that name, the same run as
    the file's path gives; a file and --example together, neither, or an unknown example
    are usage errors that say what to give."""
    saved = []
    for source, label in (
        (["--example", "stacked_boxes"], "example stacked_boxes"),
        ([str(examples.path("stacked_boxes"))], "stacked_boxes.yml"),
    ):
        saved.append(tmp_path / f"state{len(saved)}.npz")
        result = in_process(
            "run", *source, "--steps", "5", "--arch", arch, "--save", str(saved[-1])
        )
        assert result.returncode == 0, result.stderr
        assert f"{label}: 5 steps, 13 bodies" in result.stdout
    by_name, by_path = (np.load(path) for path in saved)
    np.testing.assert_array_equal(by_name["position"], by_path["position"])
    both = in_process("run", str(examples.path("truck")), "--example", "truck", "--arch", arch)
    assert both.returncode == 2 and "not a scene file and --example together" in both.stderr
    neither = in_process("run", "--steps", "3", "--arch", arch)
    assert neither.returncode == 2 and "give a scene file or --example NAME" in neither.stderr
    unknown = in_process("run", "--example", "lorry", "--arch", arch)
    assert unknown.returncode == 2 and "'lorry'" in unknown.stderr
    assert all(name in unknown.stderr for name in examples.names())


def test_main_runs_an_example_in_process(tmp_path, arch, capsys):
    from fx2d_gpu.cli import main

    png = tmp_path / "truck.png"
    assert (
        main(
            [
                "run",
                "--example",
                "truck",
                "--steps",
                "3",
                "--png",
                str(png),
                "--size",
                "64x48",
                "--arch",
                arch,
            ]
        )
        == 0
    )
    assert png.is_file() and Image.open(png).size == (64, 48)
    assert "example truck: 3 steps, 11 bodies" in capsys.readouterr().out


def test_run_and_demo_take_the_soft_step_solver(arch, capsys):
    """--solver soft_step: the scene file's or the demo's scene on the soft step, at its 4
    substeps unless --substeps says otherwise."""
    from fx2d_gpu.cli import main

    assert (
        main(["run", "--example", "truck", "--steps", "3", "--solver", "soft_step", "--arch", arch])
        == 0
    )
    assert "substeps 4, solver soft_step" in capsys.readouterr().out
    assert (
        main(
            [
                "demo",
                "pyramid",
                "--base",
                "4",
                "--steps",
                "3",
                "--solver",
                "soft_step",
                "--substeps",
                "6",
                "--arch",
                arch,
            ]
        )
        == 0
    )
    assert "substeps 6, solver soft_step" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "--example", "truck", "--solver", "pgs", "--arch", arch])


def test_view_without_a_display_says_why_and_suggests_a_gif(arch, in_process):
    from fx2d_gpu.draw.viewer import WindowFactory

    # GGUI's own windows, on an environment with neither DISPLAY nor WAYLAND_DISPLAY.
    windows = WindowFactory(
        environ={k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    )
    result = in_process("view", str(examples.path("truck")), "--arch", arch, windows=windows)
    assert result.returncode != 0
    assert "cannot open a window" in result.stderr and "--gif" in result.stderr
    result = in_process("view", "--example", "truck", "--arch", arch, windows=windows)
    assert result.returncode != 0 and "cannot open a window" in result.stderr
    assert "fx2d run --example truck --gif" in result.stderr
    result = in_process("view", "--demo", "dominoes", "--arch", arch, windows=windows)
    assert result.returncode != 0 and "fx2d demo dominoes --gif" in result.stderr


def test_view_takes_a_file_an_example_or_a_demo_exactly_one(arch, in_process):
    for args, said in (
        (["--example", "truck", "--demo", "pile"], "--example and --demo"),
        ([str(examples.path("truck")), "--example", "truck"], "a scene file and --example"),
        ([], "give a scene file or --example NAME or --demo NAME"),
        (["--demo", "no_such_demo"], "no demo named 'no_such_demo'"),
    ):
        result = in_process("view", *args, "--arch", arch)
        assert result.returncode == 2 and said in result.stderr, (args, result.stderr)


def test_demo_list_and_a_demo_run(tmp_path, arch, in_process):
    result = in_process("demo", "--list")
    assert result.returncode == 0, result.stderr
    for name in (
        "pyramid",
        "dominoes",
        "newtons_cradle",
        "rain",
        "car",
        "batched",
        "large_pile",
        "shapes",
        "lidar",
    ):
        assert f"\n  {name} " in result.stdout
    # The example scenes too, each with its one-line description, and how to run both kinds.
    assert "fx2d demo NAME" in result.stdout and "fx2d view --demo NAME" in result.stdout
    assert "fx2d run --example NAME" in result.stdout
    assert "fx2d view --example NAME" in result.stdout
    for name in examples.names():
        line = next(line for line in result.stdout.splitlines() if line.split()[:1] == [name])
        assert examples.description(name)[1:] in line
    result = in_process(
        "demo",
        "batched",
        "--steps",
        "4",
        "--every",
        "4",
        "--gif",
        str(tmp_path / "b.gif"),
        "--size",
        "160x120",
        "--arch",
        arch,
    )
    assert result.returncode == 0, result.stderr
    assert "x 16 worlds" in result.stdout


def test_lidar_demo_sees_what_is_there_and_draws_its_rays(tmp_path):
    """The lidar demo's agents steer by one batched ray cast a frame: each range is the
    distance to the first body along the ray (checked against query_point just before and
    just past it), and the rays are drawn in the GIF."""
    from fx2d_gpu.demos import demo_lidar
    from fx2d_gpu.draw.viewer import controller_of

    scene = demo_lidar(arch="cpu", n_worlds=4)
    lidar = controller_of(scene)
    for _ in range(10):
        lidar.before_step(scene)
        scene.step(1 / 60)
    lidar.before_step(scene)
    starts, ends, hit = lidar.rays
    assert hit.any() and (lidar.ranges <= lidar.reach + 1e-9).all()
    direction = (ends - starts) / lidar.ranges[..., None]
    agent = lidar.agent
    for offset, expect_inside in ((-2e-3, False), (2e-3, True)):
        probe = ends + offset * direction
        found = scene.query_point(probe)  # query index = ray index, in every world
        inside = np.zeros(hit.shape, bool)
        other = found.body != agent
        np.logical_or.at(inside, (found.world[other], found.query[other]), True)
        assert (inside[hit] == expect_inside).all()
    # The rays are drawn: red (hit) pixels appear where the frame without them has none.
    from fx2d_gpu.draw.render import render_worlds

    with_rays = render_worlds(scene, (320, 240), rays=lidar.rays).astype(int)
    plain = render_worlds(scene, (320, 240)).astype(int)
    changed = np.abs(with_rays - plain).sum(axis=-1) > 0
    assert changed.sum() > 100


def point_in_triangles(point, triangles):
    a, b, c = triangles[0::3], triangles[1::3], triangles[2::3]

    def side(p, q, r):
        return (q[:, 0] - p[:, 0]) * (r[1] - p[:, 1]) - (q[:, 1] - p[:, 1]) * (r[0] - p[:, 0])

    d1, d2, d3 = side(a, b, point), side(b, c, point), side(c, a, point)
    inside = ((d1 >= 0) & (d2 >= 0) & (d3 >= 0)) | ((d1 <= 0) & (d2 <= 0) & (d3 <= 0))
    return np.nonzero(inside)[0]


def build_mesh(scene, aspect):
    """The viewer's geometry of world 0 in the scene's default frame (the device kernel's,
    copied to NumPy): (triangles, colours, lines, line colours)."""
    return FrameGeometry(scene).update(worlds=[0], aspect=aspect).arrays()


def test_viewer_mesh_covers_each_body(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((2.0, 1.0), (1.0, 0.5), angle=0.3)
    scene.add_circle((6.0, 3.0), 0.5)
    scene.meta["size"] = (8.0, 6.0)
    tris, colours, lines, _ = build_mesh(scene, aspect=8 / 6)
    assert len(tris) == 3 * (4 + 20) and len(colours) == len(tris)
    # Window coordinates are metres / size here (the aspect matches the frame).
    # The box's 4 fan triangles come first, then the circle's 20.
    for centre, first, last in (((2.0, 1.0), 0, 4), ((6.0, 3.0), 4, 24)):
        hits = point_in_triangles(np.array(centre) / [8.0, 6.0], tris)
        assert len(hits) > 0 and np.all((hits >= first) & (hits < last)), hits
    # A point just outside the box is in no triangle.
    assert len(point_in_triangles(np.array([3.0, 1.0]) / [8.0, 6.0], tris)) == 0
    assert len(lines) == 2 * (4 + 20) + 2  # outlines and the circle's orientation mark


def test_viewer_mesh_of_capsules_rounded_boxes_edges_and_chains(arch):
    """Issue 16's shapes in the GGUI mesh: a capsule and a rounded box filled from their
    outlines (a point on the skin beyond the core is inside), an edge and a chain's links
    as lines only."""
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_capsule((2.0, 3.0), 2.0, 0.5)
    scene.add_box((6.0, 3.0), (1.0, 1.0), radius=0.25)
    scene.add_edge((0.0, 0.0), (0.5, 0.5), (7.5, 0.5))
    scene.add_chain((0.0, 0.0), [[0.5, 5.5], [4.0, 5.0], [7.5, 5.5]])
    scene.meta["size"] = (8.0, 6.0)
    tris, _, lines, _ = build_mesh(scene, aspect=8 / 6)
    for inside in ((3.4, 3.0), (2.0, 3.45), (6.7, 3.0), (6.0, 3.7)):  # skin, past the core
        assert len(point_in_triangles(np.array(inside) / [8.0, 6.0], tris)) > 0, inside
    for outside in ((3.6, 3.0), (6.74, 3.74), (4.0, 0.5)):  # past the skin; the edge
        assert len(point_in_triangles(np.array(outside) / [8.0, 6.0], tris)) == 0, outside
    ends = {tuple(np.round(p * [8.0, 6.0], 6)) for p in lines}
    assert {(0.5, 0.5), (7.5, 0.5), (0.5, 5.5), (4.0, 5.0), (7.5, 5.5)} <= ends


def test_viewer_tiles_one_per_world(arch):
    scene = fx.Scene(gravity=(0, 0), n_worlds=4, arch=arch)
    scene.add_box((0.0, 0.0), (1.0, 1.0))
    tris, _, _, _ = FrameGeometry(scene).update().arrays()
    assert len(tris) == 4 * 3 * 4
    # Four tiles: the box of each world lies in its own quarter of the window.
    centres = tris.reshape(4, -1, 2).mean(axis=1)
    quarters = {(int(x > 0.5), int(y > 0.5)) for x, y in centres}
    assert len(quarters) == 4
