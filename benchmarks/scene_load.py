"""Loading large Fx2D scene files: seconds per file and bodies per second.

    python -m benchmarks.scene_load [--bodies 50000] [--arch cpu]

Writes scene files of N bodies in Fx2D's format (each entity with a pose, physics, visual
and collision blocks, as Fx2D's examples have them): "repeated" (boxes, circles and
triangles of three sizes, what a generated pile looks like), the same without visual
blocks, and "distinct" (every body its own random polygon, nothing to share). Each is
loaded with fx2d_gpu.load_scene, beside yaml.load(text, Loader=yaml.CSafeLoader) of the same
text (what reading the file with PyYAML's fastest loader costs, before any body is made).
Saves benchmarks/results/<device>/scene_load.csv.
"""

import argparse
import datetime
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from fx2d_gpu import load_scene
from fx2d_gpu.device import runtime

from .common import device_name, print_table, save_csv

#: The scene rectangle: room for 50,000 bodies of up to 1 m without overlaps.
SIZE = 400.0


def _geometry(kind: str, values) -> str:
    return f"            geometry:\n                {kind}: {values}\n"


def scene_text(n: int, distinct: bool, visual: bool = True, seed: int = 0) -> str:
    """An Fx2D scene file of n bodies on a grid in the scene rectangle (none overlapping);
    visual=False: collision blocks only."""
    rng = np.random.default_rng(seed)
    columns = math.ceil(math.sqrt(n))
    spacing = (SIZE - 10.0) / columns
    lines = ["scene:\n    size: [400, 400]\n    gravity: [0, -9.81]\nentities:\n"]
    for i in range(n):
        x = 5.0 + spacing * (i % columns + 0.5)
        y = 5.0 + spacing * (i // columns + 0.5)
        if distinct:
            # Five points on a circle, each moved along it by less than a fifth: convex.
            angles = 2 * math.pi * (np.arange(5) + rng.uniform(-0.3, 0.3, 5)) / 5
            radius = rng.uniform(0.2, 0.4)
            points = ", ".join(
                f"[{radius * math.cos(a):.4f}, {radius * math.sin(a):.4f}]" for a in angles
            )
            geometry = _geometry("polygon", f"[{points}]")
        else:
            size = (0.3, 0.4, 0.5)[i // 3 % 3]
            geometry = [
                _geometry("rectangle", f"[{size}, {size}]"),
                _geometry("circle", f"{size / 2}"),
                _geometry("polygon", f"[[0, 0], [{size}, 0], [0, {size}]]"),
            ][i % 3]
        lines.append(
            f"    body_{i}:\n"
            f"        pose: [{x:.4f}, {y:.4f}, {rng.uniform(0, 360):.3f}]\n"
            "        physics:\n            mass: 1.0\n            elasticity: 0.2\n"
            "            static_friction: 0.4\n            dynamic_friction: 0.3\n"
            + (
                f"        visual:\n{geometry}            texture: [200, 50, 50, 255]\n"
                if visual
                else ""
            )
            + f"        collision:\n{geometry}"
        )
    return "".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=50_000)
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("repeated", "repeated_no_visual", "distinct"):
            path = Path(folder) / f"{kind}.yml"
            path.write_text(
                scene_text(
                    args.bodies, distinct=kind == "distinct", visual=kind != "repeated_no_visual"
                )
            )
            start = time.perf_counter()
            yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            plain = time.perf_counter() - start
            start = time.perf_counter()
            scene = load_scene(path, arch=args.arch)
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "date": datetime.date.today().isoformat(),
                    "device": device_name(backend),
                    "backend": backend,
                    "scene": kind,
                    "bodies": scene.n_bodies,
                    "megabytes": round(path.stat().st_size / 1e6, 2),
                    "load_s": round(seconds, 3),
                    "bodies_per_s": round(scene.n_bodies / seconds),
                    "pyyaml_c_loader_s": round(plain, 2),
                }
            )
            print_table(rows[-1:])
    print_table(rows)
    print("saved", save_csv(backend, "scene_load", rows, args.results))
    return rows


if __name__ == "__main__":
    main()
