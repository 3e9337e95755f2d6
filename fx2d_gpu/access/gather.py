"""Gathering body state straight into the caller's arrays (Scene.get_state(out=...)).

An observation of a batch of worlds is read every step, so it is written where the caller
keeps it: one kernel launch fills NumPy arrays or torch tensors in place, with no new
arrays and no copy on the host. Taichi 1.7.4 has no DLPack, but a kernel's ndarray argument
takes a NumPy array or a torch tensor as it is (on the CPU backend, a CPU tensor's memory;
on CUDA, a CUDA tensor's), so the kernel writes into the caller's memory directly. The
arrays must therefore be C-contiguous and writable (a NumPy array that is neither would be
copied by Taichi, and the copy filled instead: refused here).
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ..device import runtime
from ..records import State

if TYPE_CHECKING:
    from ..physics.solver.context import StepContext

_ROWS = ti.types.ndarray(dtype=ti.i32, ndim=1)
#: Float dtypes a gathered field may have, by library.
_NUMPY_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_TORCH_FLOATS = ("torch.float32", "torch.float64")


def _is_torch(value) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


def check_out(out, fields, leading: tuple[int, int], backend: str | None = None) -> dict:
    """The arrays of `out` to fill, checked: {field: array as the kernel takes it} for each
    of `fields` ((name, trailing shape)) that is not None. Floats share one dtype (float32
    or float64), `sleeping` is bool (passed on as uint8, the same bytes). Two fields may
    not share memory: each would overwrite the other.

    `backend`: the Taichi backend that writes the arrays (torch tensors must live where it
    writes); None: this process's (Scene's). ShardedScene passes "x64": its driver writes
    the shards' rows on the CPU.

    Raises:
        TypeError: out not a State, or a field neither a NumPy array nor a torch tensor.
        ValueError: a field of the wrong shape or dtype, not C-contiguous, not writable,
            sharing memory with another field, or a torch tensor on another device than the
            backend's (naming it: out.position).
    """
    if not isinstance(out, State):
        raise TypeError(f"out must be a fx2d_gpu.State, got {type(out).__name__}")
    arrays, float_dtype = {}, None
    for name, trailing in fields:
        value = getattr(out, name)
        if value is None:
            continue
        label = f"out.{name}"
        torch = _is_torch(value)
        if not (torch or isinstance(value, np.ndarray)):
            raise TypeError(
                f"{label} must be a NumPy array or a torch tensor, got {type(value).__name__}"
            )
        shape = leading + trailing
        if tuple(value.shape) != shape:
            raise ValueError(f"{label} must have shape {shape}, got {tuple(value.shape)}")
        dtype = str(value.dtype)  # "float32", or a tensor's "torch.float32"
        if name == "sleeping":
            if dtype not in ("bool", "torch.bool"):
                raise ValueError(f"{label} must be of dtype bool, got {dtype}")
        else:
            floats = _TORCH_FLOATS if torch else tuple(map(str, _NUMPY_FLOATS))
            if dtype not in floats:
                raise ValueError(f"{label} must be float32 or float64, got {dtype}")
            kind = dtype.removeprefix("torch.")
            if float_dtype is not None and kind != float_dtype:
                raise ValueError(
                    f"{label} is {kind}, the other fields of out {float_dtype}: "
                    "one float dtype for all"
                )
            float_dtype = kind
        if torch:
            _check_tensor(value, label, backend)
            arrays[name] = value.view(_torch_uint8()) if name == "sleeping" else value
        else:
            if not value.flags.c_contiguous:
                raise ValueError(f"{label} must be C-contiguous (np.ascontiguousarray)")
            if not value.flags.writeable:
                raise ValueError(f"{label} must be writable")
            arrays[name] = value.view(np.uint8) if name == "sleeping" else value
    _check_apart(out, list(arrays))
    return arrays


def _check_apart(out, names: list[str]):
    """Refuse two fields of `out` that share memory (NumPy arrays or torch tensors of one
    storage), naming both: the gather writes one after the other into the same bytes."""
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = getattr(out, first), getattr(out, second)
            if _is_torch(a) and _is_torch(b):
                shared = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            elif isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
                shared = np.may_share_memory(a, b)
            else:  # a tensor beside an array: torch.from_numpy's sharing is not looked for
                shared = False
            if shared:
                raise ValueError(
                    f"out.{first} and out.{second} share memory: give each "
                    "field an array of its own"
                )


def _torch_uint8():
    import torch  # only where the caller passed a tensor: torch is an optional extra

    return torch.uint8


def _check_tensor(value, label: str, backend: str | None = None):
    if not value.is_contiguous():
        raise ValueError(f"{label} must be contiguous (tensor.contiguous())")
    if value.requires_grad:
        raise ValueError(f"{label} must not require grad (use a tensor of its own)")
    backend = backend or runtime.backend_name()
    if backend not in ("cuda", "x64", "arm64"):  # Vulkan, Metal: not the tensor's memory
        raise ValueError(
            f"{label}: torch tensors are written on Taichi's CPU and CUDA "
            f"backends, the engine runs on {backend}: pass NumPy arrays"
        )
    on_cuda = value.device.type == "cuda"
    if on_cuda != (backend == "cuda"):
        raise ValueError(
            f"{label} is on {value.device}, the engine runs on Taichi's "
            f"{backend} backend: pass a {'CUDA' if backend == 'cuda' else 'CPU'} "
            "tensor"
        )


#: Stand-ins for the fields not gathered (an ndarray argument cannot be None): their ndim
#: is the field's, their dtype the gathered floats'.
def _stand_in(ndim: int, like) -> object:
    if like is None or isinstance(like, np.ndarray):
        dtype = np.float32 if like is None else like.dtype
        return np.zeros((1,) * ndim, dtype)
    return like.new_zeros((1,) * ndim)


@ti.kernel
def _gather(
    bodies: ti.template(),
    serial: ti.template(),
    wanted: ti.template(),
    rows: _ROWS,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    position: ti.types.ndarray(ndim=3),
    angle: ti.types.ndarray(ndim=2),
    velocity: ti.types.ndarray(ndim=3),
    angular_velocity: ti.types.ndarray(ndim=2),
    sleeping: ti.types.ndarray(ndim=2),
):
    """Per world and gathered body i (model row rows[i]), the wanted fields of its slot."""
    ti.loop_config(serialize=serial)
    for world, i in ti.ndrange(n_worlds, rows.shape[0]):
        slot = world * n_bodies + rows[i]
        if ti.static(wanted[0]):
            p = bodies.position[slot]
            position[world, i, 0] = p.x
            position[world, i, 1] = p.y
        if ti.static(wanted[1]):
            angle[world, i] = bodies.angle[slot]
        if ti.static(wanted[2]):
            v = bodies.velocity[slot]
            velocity[world, i, 0] = v.x
            velocity[world, i, 1] = v.y
        if ti.static(wanted[3]):
            angular_velocity[world, i] = bodies.angular_velocity[slot]
        if ti.static(wanted[4]):
            sleeping[world, i] = ti.cast(bodies.sleeping[slot], ti.u8)


def gather_bodies(ctx: "StepContext", rows: np.ndarray, arrays: dict):
    """Fill `arrays` (check_out's) with the bodies `rows` ((k,) int32 model rows) of every
    world; one launch."""
    floats = next(
        (
            arrays[name]
            for name in ("position", "angle", "velocity", "angular_velocity")
            if name in arrays
        ),
        None,
    )
    ndims = {"position": 3, "angle": 2, "velocity": 3, "angular_velocity": 2}
    args = {name: arrays.get(name, _stand_in(ndim, floats)) for name, ndim in ndims.items()}
    sleeping = arrays.get("sleeping")
    if sleeping is None:
        sleeping = np.zeros((1, 1), np.uint8)
    wanted = tuple(name in arrays for name in (*ndims, "sleeping"))
    _gather(
        ctx.pool.bodies,
        ctx.serial,
        wanted,
        np.ascontiguousarray(rows, np.int32),
        ctx.n_worlds,
        ctx.n_bodies,
        args["position"],
        args["angle"],
        args["velocity"],
        args["angular_velocity"],
        sleeping,
    )
