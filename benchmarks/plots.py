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


#: A colour per engine of the suite; others (a new one) take matplotlib's first.
_COLORS = {
    "fx2d_gpu": "C3",
    "fx2d_gpu (no sleep)": "C1",
    "pymunk": "k",
    "box2d (1 thread)": "C2",
    "box2d (2 threads)": "C4",
    "box2d (1 thread, no sleep)": "C8",
    "box2d (2 threads, no sleep)": "C9",
    "box2d native (1 worker)": "C5",
    "box2d native (2 workers)": "C6",
}


def _color(engine: str) -> str:
    return _COLORS.get(engine, "C0")


def _marker(engine: str) -> str:
    """Circles for fx2d_gpu, squares for pymunk, triangles for Box2D through pyb2d3,
    diamonds for Box2D's own benchmark program (box2d_native.py)."""
    if engine.startswith("box2d native"):
        return "D"
    return "s" if engine == "pymunk" else "^" if engine.startswith("box2d") else "o"


def plot_results(folder: Path) -> list[Path]:
    """scaling.png and batched.png in `folder` from the CSVs there; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    written = []
    rows = [
        r
        for name in ("pile", "large_pyramid", "many_pyramids", "joint_grid")
        for r in _read(folder / f"{name}.csv")
    ]
    if rows:
        # An engine's piles are a line; every other scene a point, named once, beside the
        # first engine's: with up to seven engines a name per point would hide the points.
        fig, ax = plt.subplots(figsize=(8, 5))
        engines = dict.fromkeys(r["engine"] for r in rows)  # in the CSVs' order
        for engine in engines:
            piles = sorted(
                (_number(r["bodies"]), _number(r["ms_per_step"]))
                for r in rows
                if r["engine"] == engine and r["scene"].startswith("pile")
            )
            points = [
                (_number(r["bodies"]), _number(r["ms_per_step"]))
                for r in rows
                if r["engine"] == engine and not r["scene"].startswith("pile")
            ]
            style = dict(marker=_marker(engine), color=_color(engine), label=engine)
            if piles:
                ax.plot(*zip(*piles, strict=True), **style)
                style.pop("label")
            if points:
                ax.plot(*zip(*points, strict=True), linestyle="none", **style)
        named = set()
        for r in rows:
            if not r["scene"].startswith("pile") and r["scene"] not in named:
                named.add(r["scene"])
                ax.annotate(
                    r["scene"],
                    (_number(r["bodies"]), _number(r["ms_per_step"])),
                    fontsize=7,
                    xytext=(4, 4),
                    textcoords="offset points",
                )
        device = rows[0]["device"]
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="bodies (piles: lines)",
            ylabel="ms per step (dt 1/60)",
            title=f"ms/step (median over the run), {device} ({rows[0]['date']})",
        )
        written.append(_save(fig, ax, folder / "scaling.png"))
    # Both solvers' small worlds (XPBD's file, the soft step's beside it), each a line; Box2D
    # v3 beside the largest batch (the same worlds as islands of one world), from the first
    # file that has it.
    batched = [
        r
        for name in ("batched_small", "batched_small_soft_step")
        for r in _read(folder / f"{name}.csv")
    ]
    if batched:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        engines = dict.fromkeys(r["engine"] for r in batched)
        box2d_drawn = set()
        for engine in engines:
            rows = [r for r in batched if r["engine"] == engine]
            if engine.startswith("fx2d_gpu"):
                points = sorted(
                    (_number(r["worlds"]), _number(r["world_steps_per_s"])) for r in rows
                )
                ax.plot(*zip(*points, strict=True), marker="o", label=engine)
            elif engine not in box2d_drawn:
                box2d_drawn.add(engine)
                ax.plot(
                    _number(rows[0]["worlds"]),
                    _number(rows[0]["world_steps_per_s"]),
                    marker="s",
                    linestyle="none",
                    label=engine,
                )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="worlds (8 bodies, 1 joint each)",
            ylabel="world-steps per second",
            title=f"batched_small, {batched[0]['device']} ({batched[0]['date']})",
        )
        written.append(_save(fig, ax, folder / "batched.png"))
    return written
