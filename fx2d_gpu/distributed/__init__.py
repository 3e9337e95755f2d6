"""fx2d_gpu.distributed: one scene's worlds sharded over a Ray cluster (the `distributed`
extra: from a checkout, pip install -e ".[distributed]"; from an index, pip install
"fx2d_gpu[distributed]").

ShardedScene splits a scene of n_worlds into contiguous world ranges, one Ray actor each, and
answers the Scene calls that make sense across worlds with global world indices. A shard whose
actor dies is rebuilt from its last snapshot and the changes since. See docs/distributed.md.
"""

try:
    import ray  # noqa: F401 (checked here, so that the error says what to install)
except ImportError as missing:  # pragma: no cover (CI installs the extra)
    raise ImportError(
        "fx2d_gpu.distributed needs Ray, the distributed extra: from a "
        'checkout of fx2d_gpu, pip install -e ".[distributed]" (in its root '
        'folder); from a package index, pip install "fx2d_gpu[distributed]"'
    ) from missing

from .sharded_scene import (
    ON_WORKER_LOSS,
    ShardedScene,
    ShardedSnapshot,
    ShardLostError,
    shard_ranges,
)
from .worker import build_shard_scene, cpu_threads_env, visible_device_env

__all__ = [
    "ON_WORKER_LOSS",
    "ShardLostError",
    "ShardedScene",
    "ShardedSnapshot",
    "build_shard_scene",
    "cpu_threads_env",
    "shard_ranges",
    "visible_device_env",
]
