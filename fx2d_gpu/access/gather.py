"""Gathering body state straight into the caller's arrays (Scene.get_state(out=...),
Scene.get_columns).

An observation of a batch of worlds is read every step, so it is written where the caller
keeps it: one kernel launch fills NumPy arrays or torch tensors in place, with no new
arrays and no copy on the host. Taichi 1.7.4 has no DLPack, but a kernel's ndarray argument
takes a NumPy array or a torch tensor as it is (on the CPU backend, a CPU tensor's memory;
on CUDA, a CUDA tensor's), so the kernel writes into the caller's memory directly. The
arrays must therefore be C-contiguous and writable (a NumPy array that is neither would be
copied by Taichi, and the copy filled instead: refused here).

On CUDA a NumPy array is host memory: Taichi copies it to the device before the launch and
back after it, waiting for the device on both sides (launching.host_array_count). So a
step's observation moves as few arrays and bytes as it can: get_columns writes a task's
observation values, and only those, into one array (a cart-pole's 4 float32 a world, where
its two bodies' whole state in get_state's five arrays took 12), its column list kept on
the device.
"""

import weakref
from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ..checks import as_index, as_real
from ..device import runtime
from ..device.launching import quick
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
        torch = _check_target(value, label, leading + trailing)
        dtype = str(value.dtype)  # "float32", or a tensor's "torch.float32"
        if name == "sleeping":
            if dtype not in ("bool", "torch.bool"):
                raise ValueError(f"{label} must be of dtype bool, got {dtype}")
        else:
            kind = _float_kind(value, label, torch)
            if float_dtype is not None and kind != float_dtype:
                raise ValueError(
                    f"{label} is {kind}, the other fields of out {float_dtype}: "
                    "one float dtype for all"
                )
            float_dtype = kind
        _check_writable_in_place(value, label, torch, backend)
        if name == "sleeping":
            value = value.view(_torch_uint8() if torch else np.uint8)
        arrays[name] = value
    _check_apart(out, list(arrays))
    return arrays


def _check_target(value, label: str, shape: tuple) -> bool:
    """An array a gather fills: a NumPy array or a torch tensor (returns whether a tensor) of
    `shape`, else TypeError / ValueError naming `label`."""
    torch = _is_torch(value)
    if not (torch or isinstance(value, np.ndarray)):
        raise TypeError(
            f"{label} must be a NumPy array or a torch tensor, got {type(value).__name__}"
        )
    if tuple(value.shape) != shape:
        raise ValueError(f"{label} must have shape {shape}, got {tuple(value.shape)}")
    return torch


def _float_kind(value, label: str, torch: bool) -> str:
    """ "float32" or "float64", value's dtype (a NumPy array's or a torch tensor's), else
    ValueError naming `label`."""
    dtype = str(value.dtype)
    if dtype not in (_TORCH_FLOATS if torch else tuple(map(str, _NUMPY_FLOATS))):
        raise ValueError(f"{label} must be float32 or float64, got {dtype}")
    return dtype.removeprefix("torch.")


def _check_writable_in_place(value, label: str, torch: bool, backend: str | None):
    """A kernel writes `value` where it lies: a tensor where `backend` writes (_check_tensor),
    a NumPy array C-contiguous and writable (else Taichi would fill a copy)."""
    if torch:
        _check_tensor(value, label, backend)
    elif not value.flags.c_contiguous:
        raise ValueError(f"{label} must be C-contiguous (np.ascontiguousarray)")
    elif not value.flags.writeable:
        raise ValueError(f"{label} must be writable")


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


@quick
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


#: Scene.get_columns' quantities of a body, in the order of their codes in the kernel.
QUANTITIES = ("x", "y", "angle", "vx", "vy", "angular_velocity")


def check_columns(columns, n_bodies: int) -> tuple[np.ndarray, np.ndarray]:
    """Scene.get_columns' `columns` checked: ((m, 2) int32 of (body, quantity code), (m,)
    float32 scales). Each column is (body, quantity) or (body, quantity, scale): a body
    index, a name of QUANTITIES, a finite number within float32's range (default 1.0).

    Raises:
        TypeError: columns not a sequence of tuples, a body not an int, a quantity not a
            string, a scale not a number (naming columns[i]).
        ValueError: no columns, a body out of range, an unknown quantity, a scale not
            finite (naming columns[i]).
    """
    if isinstance(columns, (str, bytes)) or not hasattr(columns, "__len__"):
        raise TypeError(
            f"columns must be a sequence of (body, quantity[, scale]), got {type(columns).__name__}"
        )
    if len(columns) == 0:
        raise ValueError("columns must hold at least one (body, quantity[, scale])")
    spec = np.empty((len(columns), 2), np.int32)
    scales = np.empty(len(columns), np.float32)
    for i, column in enumerate(columns):
        label = f"columns[{i}]"
        if not isinstance(column, (tuple, list)) or len(column) not in (2, 3):
            raise TypeError(f"{label} must be (body, quantity) or (body, quantity, scale)")
        quantity = column[1]
        if not isinstance(quantity, str):
            raise TypeError(f"{label}'s quantity must be a string, got {type(quantity).__name__}")
        if quantity not in QUANTITIES:
            raise ValueError(f"{label}'s quantity must be one of {QUANTITIES}, got {quantity!r}")
        spec[i] = (
            as_index(column[0], f"{label}'s body", n_bodies, "bodies"),
            QUANTITIES.index(quantity),
        )
        scales[i] = as_real(column[2], f"{label}'s scale") if len(column) == 3 else 1.0
    return spec, scales


def columns_target(
    columns, n_bodies: int, n_worlds: int, dtype, out, backend: str | None = None
) -> tuple[np.ndarray, np.ndarray, object]:
    """get_columns' arguments checked (Scene's and ShardedScene's): (spec, scales) as
    check_columns gives them, and the (n_worlds, m) array to fill: `out`, a C-contiguous,
    writable float32 or float64 NumPy array (or torch tensor where `backend` writes, as
    get_state's out), or else a new one of `dtype` (readout.float_dtype's, checked).

    Raises:
        TypeError, ValueError: check_columns', an `out` that breaks the rules above
            (naming out).
    """
    spec, scales = check_columns(columns, n_bodies)
    shape = (n_worlds, len(spec))
    if out is None:
        return spec, scales, np.empty(shape, dtype)
    torch = _check_target(out, "out", shape)
    _float_kind(out, "out", torch)
    _check_writable_in_place(out, "out", torch, backend)
    return spec, scales, out


@quick
@ti.kernel
def _gather_columns(
    bodies: ti.template(),
    serial: ti.template(),
    spec: ti.types.ndarray(dtype=ti.i32, ndim=2),
    scales: ti.types.ndarray(dtype=ti.f32, ndim=1),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    out: ti.types.ndarray(ndim=2),
):
    """out[world, j] = scales[j] * quantity spec[j, 1] (QUANTITIES' code) of body spec[j, 0]."""
    ti.loop_config(serialize=serial)
    for world, j in ti.ndrange(n_worlds, spec.shape[0]):
        out[world, j] = column_value(bodies, world * n_bodies + spec[j, 0], spec[j, 1], scales[j])


@ti.func
def column_value(bodies: ti.template(), slot, code, scale):
    """scale times quantity `code` (QUANTITIES' index) of body slot `slot`, in float32: a
    column's entry (_gather_columns, and a vector env's observation on the device:
    envs/device_step.py)."""
    value = bodies.angular_velocity[slot]
    if code == 0:
        value = bodies.position[slot].x
    elif code == 1:
        value = bodies.position[slot].y
    elif code == 2:
        value = bodies.angle[slot]
    elif code == 3:
        value = bodies.velocity[slot].x
    elif code == 4:
        value = bodies.velocity[slot].y
    return scale * value


#: Per device pool, the constant arrays its kernels were given so far, on the device
#: ({key of the arrays: their Taichi ndarrays}, at most _KEPT_A_POOL sets a pool): a NumPy
#: argument is copied to a GPU and back around every launch (launching.host_array_count),
#: and an observation's columns, or the bodies whose contacts a task asks about, are the
#: same every step.
_kept: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_KEPT_A_POOL = 16
_TAICHI_TYPES = {np.dtype(np.int32): ti.i32, np.dtype(np.float32): ti.f32}


def kept_on_device(pool, *arrays: np.ndarray) -> tuple:
    """`arrays` (int32 or float32 NumPy arrays) as Taichi ndarrays kept for `pool`: made on
    first use, the same ones for the same values after (gather_columns' columns,
    readout.touching's bodies)."""
    kept = _kept.setdefault(pool, {})
    key = tuple((array.dtype.str, array.shape, array.tobytes()) for array in arrays)
    if key not in kept:
        if len(kept) >= _KEPT_A_POOL:
            kept.clear()
        made = []
        for array in arrays:
            on_device = ti.ndarray(_TAICHI_TYPES[array.dtype], array.shape)
            on_device.from_numpy(array)
            made.append(on_device)
        kept[key] = tuple(made)
    return kept[key]


def gather_columns(ctx: "StepContext", spec: np.ndarray, scales: np.ndarray, out):
    """Fill `out` ((n_worlds, m)) with the columns spec and scales describe (check_columns'),
    one launch; spec and scales go to the device once per pool (kept_on_device), so the
    launch's only host array is `out` (none for a CUDA tensor)."""
    spec_nd, scales_nd = kept_on_device(ctx.pool, spec, scales)
    _gather_columns(
        ctx.pool.bodies, ctx.serial, spec_nd, scales_nd, ctx.n_worlds, ctx.n_bodies, out
    )


@quick
@ti.kernel
def mark_touching(
    manifolds: ti.template(),
    column: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    with_points: ti.template(),
    flags: ti.types.ndarray(dtype=ti.u8, ndim=2),
):
    """flags[world, column[body]] = 1 for both bodies of pairs 0..n_pairs of `manifolds` (with
    `with_points`, only pairs with points), where the body has a column (>= 0): the body
    touches something in that world (readout.touching), 0 elsewhere. Every writer writes 1.
    The flags are cleared here first: a GPU backend need not copy a host array that a
    kernel only writes to the device before the launch (Vulkan's does not)."""
    for world, c in ti.ndrange(flags.shape[0], flags.shape[1]):
        flags[world, c] = ti.u8(0)
    for pair in range(n_pairs):
        if ti.static(not with_points) or manifolds.point_count[pair] > 0:
            for end in ti.static(range(2)):
                slot = manifolds.body_a[pair] if end == 0 else manifolds.body_b[pair]
                c = column[slot % n_bodies]
                if c >= 0:
                    flags[slot // n_bodies, c] = ti.u8(1)
