"""The shard: one Ray actor holding one Scene of a ShardedScene's contiguous worlds.

ShardWorker is a plain class; sharded_scene.py makes it a Ray actor (ray.remote(...).options
with the caller's resources). It runs batches of commands on its scene and hands back the
results, and a snapshot when asked: the driver keeps that snapshot and the batches since, and
rebuilds a lost shard from them (see ShardedScene). Nothing here talks to other shards.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

from ..access.snapshots import SceneSnapshot, snapshot_values
from ..access.state_files import check_containers, check_snapshot, plainly
from ..device import runtime
from ..scene import Scene

#: How a Scene's worlds are built: a one-world template Scene, or a builder called with the
#: shard's world count that returns a Scene of that many worlds.
Source = Scene | Callable[[int], Scene]


def visible_device_env(gpu_ids, environ) -> dict[str, str]:
    """The environment variables a shard's process sets so that Taichi uses the GPU Ray gave
    it (Ray's `num_gpus` resource), before Taichi starts.

    Ray sets CUDA_VISIBLE_DEVICES to the actor's GPUs, so Taichi's CUDA backend sees only
    them (as its device 0). Taichi's Vulkan backend enumerates every Vulkan device and picks
    the one TI_VISIBLE_DEVICE names: it is set to the first of Ray's ids, unless the user set
    it. (On a node whose Vulkan and CUDA orders differ, set CUDA_DEVICE_ORDER=PCI_BUS_ID for
    Ray and check `nvidia-smi -L` against `vulkaninfo --summary`.)

    Args:
        gpu_ids (list): ray.get_gpu_ids() in the actor: the GPU ids Ray assigned (empty on a
            CPU shard).
        environ (Mapping[str, str]): the process's environment as it is.

    Returns:
        {name: value} of the variables to set (empty for a CPU shard).
    """
    ids = [
        str(int(i)) if isinstance(i, (int, np.integer)) or str(i).isdigit() else str(i)
        for i in gpu_ids
    ]
    if not ids:
        return {}
    wanted = {"CUDA_VISIBLE_DEVICES": ",".join(ids)}
    if "TI_VISIBLE_DEVICE" not in environ:
        wanted["TI_VISIBLE_DEVICE"] = ids[0]
    return {name: value for name, value in wanted.items() if environ.get(name) != value}


def cpu_threads_env(cpus: float, environ) -> dict[str, str]:
    """The environment variable that caps a shard's CPU-backend threads at the CPUs Ray gave
    it (rounded up; none for an actor given no CPUs, or where the user set it): two shards
    of one CPU each on a 2-core machine then run a thread each, not two each.

    Args:
        cpus: the actor's CPU resource (Ray's num_cpus, may be fractional).
        environ (Mapping[str, str]): the process's environment as it is.
    """
    if cpus <= 0 or runtime.CPU_THREADS_VARIABLE in environ:
        return {}
    return {runtime.CPU_THREADS_VARIABLE: str(max(1, math.ceil(cpus)))}


def build_shard_scene(source: Source, n_worlds: int) -> Scene:
    """The shard's scene of `n_worlds` worlds from `source` (see Source).

    Raises:
        TypeError: the builder returned something other than a Scene.
        ValueError: it returned a scene of another world count.
    """
    if isinstance(source, Scene):
        return source.replicate(n_worlds)
    scene = source(n_worlds)
    if not isinstance(scene, Scene):
        raise TypeError(
            f"builder({n_worlds}) must return a fx2d_gpu.Scene, got {type(scene).__name__}"
        )
    if scene.n_worlds != n_worlds:
        raise ValueError(f"builder({n_worlds}) returned a scene of {scene.n_worlds} worlds")
    return scene


class ShardWorker:
    """One shard's scene, in a Ray actor's process.

    The scene is built by the first call that needs it (describe, run, restore), not by
    the constructor: a builder that kills its process (a segfault, the OOM killer) then
    fails that call, which the driver reports as the process dying while it built the
    scene, where a constructor's death would look like an actor that never starts.

    Args:
        source: a one-world template Scene or a builder (see Source); Ray keeps it, and a
            restarted actor builds its scene from it again.
        n_worlds: this shard's worlds.

    Attributes:
        scene (Scene): the shard's scene (once built).
        gpu_ids (list[str]): the GPU ids Ray gave the actor (empty on a CPU shard).
        failure (Exception | None): what building the scene raised (re-raised by every
            call), or None.
    """

    def __init__(self, source: Source, n_worlds: int):
        import ray  # (in the actor's process, where Ray runs)

        self.gpu_ids = [str(i) for i in ray.get_gpu_ids()]
        os.environ.update(visible_device_env(self.gpu_ids, os.environ))
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0)
        os.environ.update(cpu_threads_env(cpus, os.environ))
        self._source, self._n_worlds = source, n_worlds
        self.scene: Scene | None = None
        self.failure: Exception | None = None

    def _check(self):
        """Build the scene on first use. A source that fails (a bad builder) is reported by
        every call as the error it raised: Ray would report a constructor's error as the
        actor's death."""
        if self.scene is None and self.failure is None:
            try:
                self.scene = build_shard_scene(self._source, self._n_worlds)
            except Exception as error:  # noqa: BLE001 (re-raised by every call)
                self.failure = error
        if self.failure is not None:
            raise self.failure

    def describe(self) -> dict:
        """What the driver needs to know of the shard: the model, values, clock, process.

        Returns:
            {"builder": the ModelBuilder, "params": the WorldParams, "shapes": the
            WorldShapes, "settings": Scene()'s arguments, "backend", "time", "step_count",
            "pid", "gpu_ids", and "env": the shard's CUDA_VISIBLE_DEVICES and
            TI_VISIBLE_DEVICE (None where unset)}.
        """
        self._check()
        scene = self.scene
        return {
            "builder": scene._builder,
            "params": scene._params.copy(),
            "shapes": scene._shapes.copy(),
            "settings": scene._settings(),
            "backend": scene.backend,
            "time": scene.time,
            "step_count": scene.step_count,
            "pid": os.getpid(),
            "gpu_ids": self.gpu_ids,
            "env": {
                name: os.environ.get(name)
                for name in (
                    "CUDA_VISIBLE_DEVICES",
                    "TI_VISIBLE_DEVICE",
                    runtime.CPU_THREADS_VARIABLE,
                )
            },
        }

    def finish(self, driver_pid: int) -> bool:
        """End the shard before ShardedScene.close kills its actor: drop the scene and write
        the kernels this process compiled into Taichi's offline cache
        (runtime.stop_writing_offline_cache), which a killed process never writes. Every
        call after it raises RuntimeError. Where the actor runs in the driver's process
        (`driver_pid`: Ray's local mode, a stand-in Ray), Taichi is left running: the
        driver's scenes use it, and its process writes the cache as it ends. Returns whether
        the cache was written."""
        self.scene = None
        self.failure = RuntimeError("the shard was finished (ShardedScene.close)")
        if os.getpid() == driver_pid:
            return False
        return runtime.stop_writing_offline_cache()

    def ping(self) -> int:
        """The actor's process id (the driver waits on it after a restart)."""
        return os.getpid()

    def run(self, commands: list, snapshot: bool = False) -> tuple[list, SceneSnapshot | None]:
        """Run `commands` in order on the scene; then, if asked, take a snapshot.

        Args:
            commands: (name, args, kwargs) triples: a Scene method's name, or one of
                "apply_forces" ({body: (force (n, 2), torque (n,))}), "step_n" (dt, steps:
                the steps one after the other; the last one's faulted worlds come back) and
                "inspect" (fn, args, kwargs: fn(scene, *args, **kwargs)).
            snapshot: take scene.snapshot() after the commands.

        Returns:
            (each command's result, the snapshot or None).
        """
        self._check()
        results = []
        for name, args, kwargs in commands:
            results.append(self._command(name, args, kwargs))
        return results, (self.scene.snapshot() if snapshot else None)

    def _command(self, name: str, args: tuple, kwargs: dict):
        scene = self.scene
        if name == "step_n":
            dt, steps = args
            for _ in range(steps):
                scene.step(dt)
            return scene.faulted_worlds
        if name == "apply_forces":
            for body, (force, torque) in args[0].items():
                scene.apply_force(body, force, torque)
            return None
        if name == "inspect":
            fn, fn_args, fn_kwargs = args
            return fn(scene, *fn_args, **fn_kwargs)
        return getattr(scene, name)(*args, **kwargs)

    def check_snapshot(self, snapshot: SceneSnapshot) -> None:
        """Scene.restore's checks of `snapshot` against this shard's scene, changing nothing
        (ShardedScene.restore checks every shard's part before any shard restores one).

        Raises:
            TypeError: not a SceneSnapshot.
            ValueError: it does not fit this shard's scene (naming the field).
        """
        self._check()
        if not isinstance(snapshot, SceneSnapshot):
            raise TypeError(
                f"snapshot must be a fx2d_gpu.SceneSnapshot, got {type(snapshot).__name__}"
            )
        binding = self.scene._built()
        plainly(check_containers, vars(snapshot), "snapshot")
        plainly(check_snapshot, vars(snapshot), binding, "snapshot")
        snapshot_values(snapshot.params, self.scene._builder, binding.n_worlds, (0.0, 0.0))

    def restore(self, snapshot: SceneSnapshot) -> int:
        """Put the scene back to `snapshot` (this shard's own); returns its step count."""
        self._check()
        self.scene.restore(snapshot)
        return self.scene.step_count
