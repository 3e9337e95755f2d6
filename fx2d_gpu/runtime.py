"""Taichi initialisation: one backend per process, chosen once."""

from __future__ import annotations

import ctypes
import os
import subprocess
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
    # fast_math off: with it, LLVM may reassociate a kernel's arithmetic differently in the
    # serial and parallel variants (device.SERIAL_SLOTS), so a world stepped alone and the
    # same world in a batch drift apart by rounding. Measured on the CPU it saves nothing
    # (large pyramid 27.4 ms/step either way).
    options = dict(offline_cache=True, fast_math=False, default_fp=ti.f32, default_ip=ti.i32,
                   log_level=ti.WARN)
    if arch == "auto":
        chosen = next((name for name in _gpu_candidates() if _probe(name)), None)
        if chosen is None:
            print("fx2d_gpu: no GPU backend available, running on the CPU", file=sys.stderr)
        ti.init(arch=_TI_ARCH[chosen or "cpu"], **options)
    else:
        ti.init(arch=_TI_ARCH[arch], **options)
        if arch != "cpu" and ti.lang.impl.current_cfg().arch in (ti.cpu, ti.x64, ti.arm64):
            print(f"fx2d_gpu: backend {arch!r} unavailable, running on the CPU", file=sys.stderr)
    _state["arch"] = ti.lang.impl.current_cfg().arch.name
    _state["requested"] = arch
    return _state["arch"]


def available_memory() -> int | None:
    """Bytes the device arrays may take: the host's available memory on CPU backends (from
    /proc/meminfo, else the physical memory); None on GPU backends (not known here)."""
    if not on_cpu():
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def on_cpu() -> bool:
    """True when Taichi runs on a CPU backend (after ensure_initialized)."""
    return _state["arch"] is not None and _matches("cpu", _state["arch"])


def _matches(requested: str, running: str) -> bool:
    if requested == "gpu":
        return running in ("cuda", "vulkan", "metal", "opengl", "amdgpu")
    if requested == "cpu":
        return running in ("x64", "arm64")
    return requested == running


def _loadable(*names: str) -> bool:
    for name in names:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def gpu_available() -> bool:
    """Whether Taichi starts on a GPU backend of this machine (each tried in a child
    process)."""
    return any(_probe(name) for name in _gpu_candidates())


def _gpu_candidates() -> list[str]:
    """GPU backends whose driver library is present, best first."""
    candidates = []
    if sys.platform == "darwin":
        candidates.append("metal")
    if _loadable("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        candidates.append("cuda")
    if _loadable("libvulkan.so.1", "libvulkan.so", "vulkan-1.dll", "libvulkan.1.dylib"):
        candidates.append("vulkan")
    return candidates


def _probe(arch: str) -> bool:
    """Whether Taichi starts on `arch`, tried in a child process.

    A broken driver can crash ti.init outright (seen with arch=ti.gpu on machines without a
    GPU), so the attempt must not happen in the user's process.
    """
    code = (f"import taichi as ti; ti.init(arch=ti.{arch}, log_level=ti.ERROR); "
            f"import sys; sys.exit(0 if ti.lang.impl.current_cfg().arch == ti.{arch} else 1)")
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0
