"""Plots of a device's benchmark CSVs: ms/step against bodies, world-steps/s against worlds."""

import csv
from pathlib import Path


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _save(fig, ax, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_results(folder: Path) -> list[Path]:
    """scaling.png and batched.png in `folder` from the CSVs there; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    written = []
    rows = [r for name in ("pile", "large_pyramid", "many_pyramids", "joint_grid")
            for r in _read(folder / f"{name}.csv")]
    if rows:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for engine, marker in (("fx2d_gpu", "o"), ("pymunk", "s")):
            piles = sorted((_number(r["bodies"]), _number(r["ms_per_step"])) for r in rows
                           if r["engine"] == engine and r["scene"].startswith("pile"))
            if piles:
                ax.plot(*zip(*piles, strict=True), marker=marker, label=f"{engine}: pile")
        colors = {"fx2d_gpu": "C3", "fx2d_gpu (no sleep)": "C1", "pymunk": "k"}
        for r in rows:
            if not r["scene"].startswith("pile"):
                x, y = _number(r["bodies"]), _number(r["ms_per_step"])
                ax.plot([x], [y], marker="s" if r["engine"] == "pymunk" else "o",
                        color=colors.get(r["engine"], "C0"), linestyle="none")
                ax.annotate(f"{r['scene']} ({r['engine']})", (x, y), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        device = rows[0]["device"]
        ax.set(xscale="log", yscale="log", xlabel="bodies", ylabel="ms per step (dt 1/60)",
               title=f"ms/step (median over the run) against bodies, {device} "
                     f"({rows[0]['date']})")
        written.append(_save(fig, ax, folder / "scaling.png"))
    batched = _read(folder / "batched_small.csv")
    if batched:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        points = sorted((_number(r["worlds"]), _number(r["world_steps_per_s"]))
                        for r in batched)
        ax.plot(*zip(*points, strict=True), marker="o", label="fx2d_gpu")
        ax.set(xscale="log", yscale="log", xlabel="worlds (8 bodies, 1 joint each)",
               ylabel="world-steps per second",
               title=f"batched_small, {batched[0]['device']} ({batched[0]['date']})")
        written.append(_save(fig, ax, folder / "batched.png"))
    return written
