"""The command line, the headless renderer and the benchmark scripts run end to end."""

import csv

import numpy as np
from PIL import Image

import fx2d_gpu as fx
from benchmarks import collision
from fx2d_gpu import cli
from fx2d_gpu.draw.render import render, write_png


def read_png(path):
    """(h, w, 3) uint8 pixels of a PNG file (Pillow writes it with filtered rows)."""
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def test_render_puts_bodies_where_their_state_says(arch, tmp_path):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0, -0.5), (10, 1), mass=0)
    scene.add_circle((3.0, 1.0), 0.5)
    image = render(scene, size=(200, 100), bounds=(-5, -1, 5, 4), contacts=False)
    write_png(tmp_path / "a.png", image)
    back = read_png(tmp_path / "a.png")
    np.testing.assert_array_equal(back, image)
    # 20 px per metre; the circle's centre (3, 1) maps to pixel (160, 60).
    assert tuple(back[60, 160]) != tuple(back[5, 5])  # filled
    assert tuple(back[60, 100]) == tuple(back[5, 5])  # empty sky at (0, 1)
    assert tuple(back[90, 100]) != tuple(back[5, 5])  # the ground at (0, -0.5)


def test_cli_demo_writes_an_image(tmp_path, capsys, arch):
    out = tmp_path / "pile.png"
    cli.main(
        [
            "demo",
            "pile",
            "--bodies",
            "60",
            "--steps",
            "2",
            "--png",
            str(out),
            "--arch",
            arch,
            "--contacts",
        ]
    )
    image = read_png(out)
    assert image.shape == (480, 640, 3)
    assert (image[..., 0] == 200).sum() > 0  # red contact markers were drawn
    assert "contact manifolds" in capsys.readouterr().out


def test_collision_benchmark_runs(tmp_path, arch):
    collision.main(["--arch", arch, "--sizes", "200", "--results", str(tmp_path)])
    rows = list(csv.DictReader(next(tmp_path.rglob("collision.csv")).open()))
    assert rows[0]["bodies"] == "203" and int(rows[0]["pairs"]) > 0


def test_auto_arch_falls_back_to_cpu_with_a_notice(tmp_path):
    # In a child process: Taichi is initialised once per process.
    import subprocess
    import sys

    from fx2d_gpu.device import runtime

    code = (
        "import fx2d_gpu as fx; s = fx.Scene(arch='auto'); s.add_circle((0, 0), 1.0); "
        "s.step(0.01); print('backend', s.backend)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    backend = result.stdout.split("backend")[-1].strip()
    if not runtime.gpu_available():
        assert backend == "x64" or backend == "arm64"
        assert "running on the CPU" in result.stderr
    else:
        assert backend in ("cuda", "vulkan", "metal")
