"""Taichi initialisation: one backend per process, chosen once."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import subprocess
import sys
import time

import taichi as ti

from . import launching

ARCHS = ("auto", "cpu", "gpu", "cuda", "vulkan", "metal")
_TI_ARCH = {"cpu": ti.cpu, "gpu": ti.gpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "metal": ti.metal}

_state = {"arch": None, "requested": None, "software_vulkan": False}
#: The Vulkan loader's names (Linux, Windows, macOS).
_VULKAN_LIBRARIES = ("libvulkan.so.1", "libvulkan.so", "vulkan-1.dll", "libvulkan.1.dylib")


def backend_name() -> str | None:
    """Name of the backend Taichi runs on ("x64", "cuda", "vulkan", ...), or None before init."""
    return _state["arch"]


#: The offline kernel cache's size cap (bytes): see ensure_initialized.
OFFLINE_CACHE_MAX_BYTES = 1 << 30


def ensure_initialized(
    arch: str = "auto", kernel_profiler: bool = False, taichi_options: dict | None = None
) -> str:
    """Initialise Taichi for `arch` the first time; later calls must agree with it.

    "auto" picks the first GPU backend that starts and falls back to the CPU with a one-line
    notice. Taichi's offline cache stays on, so a second process starts faster.
    `kernel_profiler`: turn on Taichi's kernel profiler (records every offloaded task's
    launch; benchmarks.launches counts them), where this call starts Taichi.
    `taichi_options`: ti.init options over the engine's own (below), where this call starts
    Taichi: a measurement's (python -m benchmarks --taichi-option), not a user's setting.
    """
    if not isinstance(arch, str):
        raise TypeError(f"arch must be a string, got {type(arch).__name__}")
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    if _state.get("stopped"):
        raise RuntimeError(
            "Taichi was stopped in this process (runtime.stop_writing_offline_cache)"
        )
    launching.cache_source_positions()
    launching.cache_function_sources()
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
    # advanced_optimization off: Taichi's own IR optimisations (CSE, store forwarding over
    # the control-flow graph, ...) took most of a cold compile; LLVM still optimises the
    # code after them. Measured on the 2-core CPU: a small scene's first step with an empty
    # offline cache 99 s -> 16 s, the large pyramid's 57 s -> 21 s; steps ~5% slower
    # (large pyramid 38.7 -> 41.7 ms, 4,096 small worlds 58 -> 61 ms) and bitwise the same.
    # unrolling_limit 0: no warning for static loops over more than 32 items; the grouped
    # transfers (transfer.write_groups) unroll one copy per field, up to ~80 of them in one
    # kernel on purpose (one kernel instead of one per field).
    # make_thread_local off on the CPU backend (_CPU_OPTIONS): see there.
    # offline_cache_max_size_of_files: Taichi's default cap (100 MB, then an LRU clean of a
    # quarter at exit) is below what the test suite's two tiers and a few branches compile
    # (the default tier alone ~70 MB), so kernels were evicted and compiled again: the
    # README's warm test run took 5:37 instead of 4:01 with a 102 MB cache.
    options = dict(
        offline_cache=True,
        offline_cache_max_size_of_files=OFFLINE_CACHE_MAX_BYTES,
        fast_math=False,
        advanced_optimization=False,
        default_fp=ti.f32,
        default_ip=ti.i32,
        log_level=ti.WARN,
        unrolling_limit=0,
        kernel_profiler=bool(kernel_profiler),
    )
    options.update(taichi_options or {})
    threads = cpu_threads_setting()
    if threads is not None:  # (Taichi's default: every hardware thread)
        options["cpu_max_num_threads"] = threads
    clear_stale_cache_locks(offline_cache_path())
    if arch in ("auto", "gpu"):
        # Not Taichi's own ti.gpu: it would take a software Vulkan device (Mesa's llvmpipe)
        # for a GPU, and run slower than the CPU backend.
        chosen = next((name for name in _gpu_candidates() if _probe(name)), None)
        if chosen is None:
            print("fx2d_gpu: no GPU backend available, running on the CPU", file=sys.stderr)
        _init_taichi(_TI_ARCH[chosen or "cpu"], options)
    else:
        if arch == "vulkan" and software_vulkan_only():
            print(
                "fx2d_gpu: arch='vulkan' runs on a software Vulkan driver (no GPU): it "
                "tests the GPU code path and is slower than arch='cpu'",
                file=sys.stderr,
            )
            _state["software_vulkan"] = True
        _init_taichi(_TI_ARCH[arch], options)
        if arch != "cpu" and ti.lang.impl.current_cfg().arch in (ti.cpu, ti.x64, ti.arm64):
            print(f"fx2d_gpu: backend {arch!r} unavailable, running on the CPU", file=sys.stderr)
    _state["arch"] = ti.lang.impl.current_cfg().arch.name
    _state["requested"] = arch
    return _state["arch"]


def _init_taichi(ti_arch, options: dict):
    """ti.init(arch=ti_arch, **options), its "[Taichi] Starting on arch=..." line on stderr:
    Taichi prints it to stdout, where it would mix into a program's output (fx2d run's
    summary, piped on), as its import banner would (fx2d_gpu._quiet_taichi). On the CPU
    backend, _CPU_OPTIONS' settings where `options` name none (not where Taichi
    falls back to the CPU from a GPU backend that did not start)."""
    if ti_arch == ti.cpu:
        options = {**_CPU_OPTIONS, **options}
    with contextlib.redirect_stdout(sys.stderr):
        ti.init(arch=ti_arch, **options)


#: ti.init options of the CPU backend only (_init_taichi), under the engine's own.
#:
#: make_thread_local off: Taichi's pass that turns a parallel loop's atomic additions to
#: one address into per-thread sums walks each offloaded task's statements once per
#: candidate atomic, and the team's launch (solver/fused.py) is one task of ~10^5
#: statements: it took 11.5 s of a folded team kernel's 72 s cold compile (Taichi's scoped
#: profiler, 2-core CPU VM) and 1.1 s of the default team kernel's ~15 s. In every kernel
#: of a pile, a pyramid stepped stage by stage and a batch of small worlds it found one
#: thing to rewrite: the fault count's integer increment (faults._mark), which runs only
#: as a world faults (the IR printed after the pass, 2026-12-07). Integer sums are the
#: same in any order, so the steps are bit for bit as with the pass. GPU backends keep
#: Taichi's default (kernels compiled only there were not looked at).
_CPU_OPTIONS = {"make_thread_local": False}


#: The environment variable that caps the CPU backend's threads (a shard of
#: fx2d_gpu.distributed sets it to the CPUs Ray gave it).
CPU_THREADS_VARIABLE = "FX2D_CPU_THREADS"


def cpu_threads_setting(environ=None) -> int | None:
    """The CPU backend's thread count FX2D_CPU_THREADS asks for (read when Taichi starts), or
    None (unset: Taichi's default, every hardware thread). `environ`: the variables to read
    it from (a mapping; None: this process's, os.environ).

    Raises:
        ValueError: the variable is set to something other than an int >= 1.
    """
    value = (os.environ if environ is None else environ).get(CPU_THREADS_VARIABLE)
    if value is None or value == "":
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{CPU_THREADS_VARIABLE} must be an int >= 1, got {value!r}")
    return threads


#: check_mapping_headroom reads the process's memory mappings every this many calls.
MAPPING_CHECK_CALLS = 10


def count_mappings() -> tuple[int, int] | None:
    """(memory mappings this process holds, the most the kernel allows it:
    vm.max_map_count), or None where /proc does not say (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as limit_file:
            limit = int(limit_file.read())
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps), limit
    except (OSError, ValueError):
        return None


class MappingWatch:
    """Watches the process's memory mappings before each step on a software Vulkan device
    (see check_mapping_headroom, which asks the process's watch, mapping_watch()).

    Args:
        count: the counter of (mappings held, the most allowed) or None where unknown
            (default count_mappings: this process's, from /proc).
        software_vulkan: whether the watch counts: True or False, or None (the default)
            for "Taichi started on a software Vulkan device in this process" (the only
            driver known to keep a mapping per launch).

    Attributes:
        calls: checks asked for so far (one a step); every MAPPING_CHECK_CALLS-th counts.
        last: the mappings held at the last count (None: not counted yet).
    """

    def __init__(self, count=count_mappings, software_vulkan: bool | None = None):
        self.count = count
        self.software_vulkan = software_vulkan
        self.calls = 0
        self.last: int | None = None

    @property
    def counting(self) -> bool:
        """Whether check() counts (software_vulkan, or the backend's where None)."""
        if self.software_vulkan is None:
            return _state["software_vulkan"]
        return self.software_vulkan

    def check(self):
        """check_mapping_headroom's check with this watch's counter and counts."""
        if not self.counting:
            return
        self.calls += 1
        if self.calls % MAPPING_CHECK_CALLS != 1:
            return
        counted = self.count()
        if counted is None:
            return
        held, limit = counted
        growth = held - self.last if self.last is not None else 0
        self.last = held
        if held + 2 * max(growth, 0) >= limit:
            raise RuntimeError(
                f"fx2d_gpu: the software Vulkan driver keeps a memory mapping for every kernel "
                f"launch, and this process holds {held:,} of the {limit:,} Linux allows "
                f"(vm.max_map_count): the next steps would crash it. Raise the limit (sudo "
                f"sysctl -w vm.max_map_count=16777216) or run on arch='cpu'"
            )


#: The process's watch (mapping_watch; watching_mappings sets another for a while).
_watch = [MappingWatch()]


def mapping_watch() -> MappingWatch:
    """The watch check_mapping_headroom asks now: the process's (the mappings are the
    process's, whichever scene steps)."""
    return _watch[-1]


@contextlib.contextmanager
def watching_mappings(watch: MappingWatch):
    """Inside the block, check_mapping_headroom asks `watch` (its counter, its idea of the
    backend) instead of the process's: to see the check with given counts, or to turn it
    off; the process's watch again after it."""
    _watch.append(watch)
    try:
        yield watch
    finally:
        _watch.remove(watch)


def check_mapping_headroom():
    """Before a step on a software Vulkan device: raise RuntimeError, instead of letting the
    process crash, when the process is about to run out of memory mappings.

    Mesa's software Vulkan driver (lavapipe, Mesa 25.0 measured) keeps one memory mapping
    for every kernel launch Taichi 1.7.4 makes (three for a kernel that returns a value),
    and once a process holds Linux's vm.max_map_count of them (65,530 by default) its next
    descriptor-set allocation writes through a null pointer: a segmentation fault, ~120
    steps into a 79-body pyramid. Every MAPPING_CHECK_CALLS calls this counts the
    mappings (mapping_watch()); it raises when twice the growth since the last count would
    pass the limit. Nothing on other backends."""
    _watch[-1].check()


#: A lock file of Taichi's offline cache older than this (s) belongs to no running process:
#: Taichi holds it for a moment while it writes the cache's index at exit.
STALE_LOCK_SECONDS = 600


def stop_writing_offline_cache() -> bool:
    """Stop Taichi in this process, writing the kernels it compiled into its offline cache
    (ti.reset), for a process about to be killed: Taichi writes its cache only at ti.reset or
    as its process ends normally, and a Ray actor is ended with SIGKILL (a ShardedScene's
    shard at close: ShardWorker.finish). Nothing of Taichi's (scenes, fields) may be used in
    this process afterwards, and ensure_initialized raises RuntimeError. Returns whether
    Taichi had started."""
    if _state.get("stopped"):
        return False
    _state["stopped"] = True
    if _state["arch"] is None:
        return False
    ti.reset()
    return True


def offline_cache_path() -> str:
    """The folder of Taichi's offline cache: $TI_OFFLINE_CACHE_FILE_PATH, else Taichi's
    default (~/.cache/taichi/ticache on Linux)."""
    from taichi._lib import core

    default = core.CompileConfig().offline_cache_file_path
    return os.environ.get("TI_OFFLINE_CACHE_FILE_PATH") or default


def clear_stale_cache_locks(path: str) -> list[str]:
    """Remove the lock files (*.lock) in Taichi's offline-cache folder `path` older than
    STALE_LOCK_SECONDS; returns their paths.

    Why: a lock left behind (a process ended while holding it) makes every later process
    skip writing the cache ("Lock ... failed"), so each one compiles everything from
    scratch: a small scene's first step 6.9 s instead of 2.9 s, for good. Seen on a
    development machine of this project; Taichi 1.7.4 never removes such a lock itself.
    """
    removed = []
    try:
        entries = list(os.scandir(path))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        try:
            if (
                entry.name.endswith(".lock")
                and entry.is_file()
                and now - entry.stat().st_mtime > STALE_LOCK_SECONDS
            ):
                os.remove(entry.path)
                removed.append(entry.path)
        except OSError:  # another process removed it first, or no permission: leave it
            continue
    return removed


def available_memory() -> int | None:
    """Bytes the device arrays may take: the host's available memory on CPU backends (from
    /proc/meminfo, else the physical memory); on CUDA the device's free memory (the CUDA
    driver's cuMemGetInfo in Taichi's context); None on other GPU backends (not known)."""
    if _state["arch"] == "cuda":
        return _cuda_free_memory()
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


def _cuda_free_memory() -> int | None:
    """Free bytes of the CUDA device in the calling thread's current context (Taichi makes
    its context current in the thread that started it), or None where the driver cannot
    say (no libcuda, or another thread with no current context)."""
    try:
        driver = ctypes.CDLL("libcuda.so.1" if sys.platform.startswith("linux") else "nvcuda")
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        status = driver.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    except (OSError, AttributeError):
        return None
    return int(free.value) if status == 0 else None


def cuda_multiprocessors() -> int | None:
    """Streaming multiprocessors of the CUDA device (cuda_device_attribute), or None."""
    count = cuda_device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    return count if count is not None and count > 0 else None


def cuda_device_attribute(attribute: int) -> int | None:
    """A CUdevice_attribute (CUDA driver API) of the CUDA device of the calling thread's
    current context (Taichi's; device 0 where none is current), or None where the driver
    cannot say. Asked once a process, each attribute."""
    if attribute not in _cuda_device:
        _cuda_device[attribute] = _ask_cuda_attribute(attribute)
    return _cuda_device[attribute]


#: What the CUDA driver said about the device, by attribute, asked once
#: (cuda_device_attribute).
_cuda_device: dict = {}
#: CUDA driver API CUdevice_attribute values asked for.
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def _ask_cuda_attribute(attribute: int) -> int | None:
    try:
        driver = ctypes.CDLL("libcuda.so.1" if sys.platform.startswith("linux") else "nvcuda")
        device, value = ctypes.c_int(0), ctypes.c_int(0)
        if driver.cuCtxGetDevice(ctypes.byref(device)) != 0:
            device = ctypes.c_int(0)
        status = driver.cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
    except (OSError, AttributeError):
        return None
    return int(value.value) if status == 0 else None


def on_cpu() -> bool:
    """True when Taichi runs on a CPU backend (after ensure_initialized)."""
    return _state["arch"] is not None and _matches("cpu", _state["arch"])


def on_software_vulkan() -> bool:
    """True when Taichi runs on Vulkan through a software driver only (Mesa's lavapipe: the
    GPU code path on a CPU, after ensure_initialized)."""
    return bool(_state["software_vulkan"])


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


def gpu_backend_available(arch: str) -> bool:
    """Whether Taichi starts on GPU backend `arch` ("cuda", "vulkan", "metal") here: its
    driver library loads and a child process starts on it (Vulkan: on a hardware device)."""
    return arch in _gpu_candidates() and _probe(arch)


def _gpu_candidates() -> list[str]:
    """GPU backends whose driver library is present, best first."""
    candidates = []
    if sys.platform == "darwin":
        candidates.append("metal")
    if _loadable("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        candidates.append("cuda")
    if _loadable(*_VULKAN_LIBRARIES):
        candidates.append("vulkan")
    return candidates


def _probe(arch: str) -> bool:
    """Whether Taichi starts on `arch` on a GPU (for Vulkan: a hardware device, not a
    software driver), tried in a child process.

    A broken driver can crash ti.init outright (seen with arch=ti.gpu on machines without a
    GPU), so the attempt must not happen in the user's process.
    """
    if arch == "vulkan" and not set(probe_vulkan_device_types()) & VULKAN_GPU_TYPES:
        return False
    code = (
        f"import taichi as ti; ti.init(arch=ti.{arch}, log_level=ti.ERROR); "
        f"import sys; sys.exit(0 if ti.lang.impl.current_cfg().arch == ti.{arch} else 1)"
    )
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


#: VkPhysicalDeviceType values of real GPUs: integrated, discrete, virtual (a VM's GPU).
#: Type 4 is a CPU (Mesa's llvmpipe, SwiftShader), 0 "other".
VULKAN_GPU_TYPES = frozenset({1, 2, 3})


def vulkan_device_types() -> list[int]:
    """The VkPhysicalDeviceType of each Vulkan device the loader lists ([] without a Vulkan
    loader or driver). Calls the Vulkan API through ctypes: may crash with a broken driver,
    so fx2d_gpu calls it in a child process (probe_vulkan_device_types)."""
    for name in _VULKAN_LIBRARIES:
        try:
            vulkan = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return []

    class InstanceCreateInfo(ctypes.Structure):
        _fields_ = [
            ("sType", ctypes.c_int),
            ("pNext", ctypes.c_void_p),
            ("flags", ctypes.c_uint32),
            ("pApplicationInfo", ctypes.c_void_p),
            ("enabledLayerCount", ctypes.c_uint32),
            ("ppEnabledLayerNames", ctypes.c_void_p),
            ("enabledExtensionCount", ctypes.c_uint32),
            ("ppEnabledExtensionNames", ctypes.c_void_p),
        ]

    info = InstanceCreateInfo(sType=1)  # VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
    instance = ctypes.c_void_p()
    if vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        return []
    try:
        count = ctypes.c_uint32(0)
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        devices = (ctypes.c_void_p * count.value)()
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
        types = []
        for device in devices[: count.value]:
            # VkPhysicalDeviceProperties: apiVersion, driverVersion, vendorID, deviceID
            # (uint32 each), then deviceType; the struct is under 1 KiB.
            properties = ctypes.create_string_buffer(4096)
            vulkan.vkGetPhysicalDeviceProperties(ctypes.c_void_p(device), properties)
            types.append(int.from_bytes(properties.raw[16:20], "little"))
        return types
    finally:
        vulkan.vkDestroyInstance(instance, None)


def probe_vulkan_device_types() -> list[int]:
    """vulkan_device_types(), asked in a child process ([] if that fails or crashes), once a
    process: a process's devices do not change, and each child costs ~1-2 s (it imports
    Taichi)."""
    return list(_probed_vulkan_device_types())


@functools.cache
def _probed_vulkan_device_types() -> tuple[int, ...]:
    code = "from fx2d_gpu.device.runtime import vulkan_device_types; print(vulkan_device_types())"
    # The child imports this package from where this process did (a source checkout on
    # sys.path need not be installed).
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [package_parent] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    try:
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        return tuple(json.loads(run.stdout.strip().splitlines()[-1])) if run.returncode == 0 else ()
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return ()


def software_vulkan_only() -> bool:
    """Whether this machine has Vulkan devices and none of them is a GPU (Mesa's lavapipe,
    SwiftShader): Taichi's Vulkan backend then runs the GPU code path on the CPU, slowly."""
    types = set(probe_vulkan_device_types())
    return bool(types) and not types & VULKAN_GPU_TYPES
