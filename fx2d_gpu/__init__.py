"""fx2d_gpu: a batched 2D rigid-body physics engine on Taichi, after Fx2D's XPBD design."""

from . import _quiet_taichi  # noqa: F401  (first: Taichi's import banner goes to stderr)
from .access.snapshots import SceneSnapshot
from .device.residency import CapacityError
from .io.scene_loader import load_scene
from .physics.solver.faults import SimulationError
from .physics.solver.plan import StepOptions
from .physics.solver.profile import StepProfile
from .records import (
    ContactEventList,
    ContactEvents,
    Contacts,
    JointState,
    Overlaps,
    RayHitList,
    RayHits,
    State,
)
from .scene import Scene
from .shapes import MAX_POLYGON_VERTICES

__all__ = [
    "CapacityError",
    "ContactEventList",
    "ContactEvents",
    "Contacts",
    "JointState",
    "MAX_POLYGON_VERTICES",
    "Overlaps",
    "RayHitList",
    "RayHits",
    "Scene",
    "SceneSnapshot",
    "SimulationError",
    "State",
    "StepOptions",
    "StepProfile",
    "load_scene",
]
__version__ = "0.1.0"
