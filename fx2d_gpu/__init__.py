"""fx2d_gpu: a batched 2D rigid-body physics engine on Taichi, after Fx2D's XPBD design."""

from .scene import Contacts, Scene, State
from .shapes import MAX_POLYGON_VERTICES

__all__ = ["Contacts", "MAX_POLYGON_VERTICES", "Scene", "State"]
__version__ = "0.1.0"
