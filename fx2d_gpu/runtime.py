"""Taichi initialisation: one backend per process, chosen once."""

from __future__ import annotations

import sys

import taichi as ti

ARCHS = ("auto", "cpu", "gpu", "cuda", "vulkan", "metal")
_TI_ARCH = {"cpu": ti.cpu, "gpu": ti.gpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "metal": ti.metal}

_state = {"arch": None, "requested": None}


def backend_name() -> str | None:
    """Name of the backend Taichi runs on ("x64", "cuda", "vulkan", ...), or None before init."""
    return _state["arch"]


def ensure_initialized(arch: str = "auto") -> str:
    """Initialise Taichi for `arch` the first time; later calls must agree with it.

    "auto" picks the first GPU backend that starts and falls back to the CPU with a one-line
    notice. Taichi's offline cache stays on, so a second process starts faster.
    """
    if not isinstance(arch, str):
        raise TypeError(f"arch must be a string, got {type(arch).__name__}")
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    if _state["arch"] is not None:
        requested = _state["requested"]
        if arch not in ("auto", requested) and not _matches(arch, _state["arch"]):
            raise ValueError(
                f"arch={arch!r}: Taichi already runs on {_state['arch']!r} in this process "
                "(one backend per process)"
            )
        return _state["arch"]
    options = dict(offline_cache=True, default_fp=ti.f32, default_ip=ti.i32, log_level=ti.WARN)
    if arch == "auto":
        ti.init(arch=ti.gpu, **options)
        chosen = ti.lang.impl.current_cfg().arch
        if chosen in (ti.cpu, ti.x64, ti.arm64):
            print("fx2d_gpu: no GPU backend available, running on the CPU", file=sys.stderr)
    else:
        ti.init(arch=_TI_ARCH[arch], **options)
        chosen = ti.lang.impl.current_cfg().arch
        if arch != "cpu" and chosen in (ti.cpu, ti.x64, ti.arm64):
            print(f"fx2d_gpu: backend {arch!r} unavailable, running on the CPU", file=sys.stderr)
    _state["arch"] = ti.lang.impl.current_cfg().arch.name
    _state["requested"] = arch
    return _state["arch"]


def _matches(requested: str, running: str) -> bool:
    if requested == "gpu":
        return running in ("cuda", "vulkan", "metal", "opengl", "amdgpu")
    if requested == "cpu":
        return running in ("x64", "arm64")
    return requested == running
