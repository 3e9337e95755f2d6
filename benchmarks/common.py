"""Shared benchmark helpers: device naming, timing, CSV output."""

import csv
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import taichi as ti

RESULTS = Path(__file__).parent / "results"


def device_name(backend: str) -> str:
    """A short, file-system-safe name of the device the backend runs on."""
    name = None
    if backend == "cuda":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout
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
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip("_")


def timed(fn, repeats: int, windows: int = 5) -> float:
    """Median over `windows` of the mean time (ms) of `repeats` calls, device synced."""
    per_window = []
    for _ in range(windows):
        ti.sync()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        ti.sync()
        per_window.append((time.perf_counter() - start) * 1000.0 / repeats)
    return statistics.median(per_window)


def save_csv(backend: str, name: str, rows: list[dict], results=None):
    folder = Path(results or RESULTS) / device_name(backend)
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
